//===- CudaLoopFusionTest.cpp - which parallel loops become one launch ----===//
//
// fuseParallelLoops (CudaLoopFusion.cpp) on hand-written kernels of
// scf.parallel loops over memrefs: each case says how many loops are left
// and, for a fused kernel, that the fused order is the original order of
// every element's accesses. And rowLocal, which loops a row launch may run
// row by row (CudaRowLaunches.cpp). The values themselves are checked end
// to end by test/omnic/cuda-emulate.test and cuda-row-launches.mlir.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/cuda/CudaLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

struct Fused {
  int loops = -1;
  /// The function's arguments and scratch sizes left.
  unsigned arguments = 0;
  std::vector<int64_t> scratch;
  /// The stores and loads of the first loop left, in order, as
  /// "store <arg>" / "load <arg>" (the memref's argument number).
  std::vector<std::string> accesses;
};

/// The test kernels' context.
struct Kernel {
  Kernel() : context(registry()) {}
  static DialectRegistry registry() {
    DialectRegistry r;
    r.insert<arith::ArithDialect, func::FuncDialect, memref::MemRefDialect,
             scf::SCFDialect>();
    return r;
  }
  /// Parses `body` as the body of @k(%a0, %a1, %a2, %a3: memref<8x8xf32>,
  /// %s: memref<8xf64>) (the last one scratch), with index constants %c0,
  /// %c1, %c4, %c7, %c8 and zeros %f0 (f32), %d0 (f64); null (and a test
  /// failure) when it does not parse.
  func::FuncOp parse(const std::string &body) {
    const std::string source =
        "func.func @k(%a0: memref<8x8xf32>, %a1: memref<8x8xf32>, "
        "%a2: memref<8x8xf32>, %a3: memref<8x8xf32>, %s: memref<8xf64>) {\n"
        "  %c0 = arith.constant 0 : index\n"
        "  %c1 = arith.constant 1 : index\n"
        "  %c4 = arith.constant 4 : index\n"
        "  %c7 = arith.constant 7 : index\n"
        "  %c8 = arith.constant 8 : index\n"
        "  %f0 = arith.constant 0.0 : f32\n"
        "  %d0 = arith.constant 0.0 : f64\n" +
        body + "  return\n}\n";
    module = parseSourceString<ModuleOp>(source, ParserConfig(&context));
    if (!module) {
      ADD_FAILURE() << "does not parse:\n" << source;
      return nullptr;
    }
    return *module->getOps<func::FuncOp>().begin();
  }
  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

/// Parses `body` (Kernel::parse), fuses, and reports. `sameBuffers`: the
/// argument pairs the memory plan may make one buffer. With `registers`,
/// scratchToRegisters runs after the fusion.
Fused fuse(const std::string &body,
           std::vector<std::pair<unsigned, unsigned>> sameBuffers = {},
           bool registers = false) {
  Kernel kernel;
  Fused out;
  func::FuncOp fn = kernel.parse(body);
  if (!fn)
    return out;
  ModuleOp module = *kernel.module;
  mlir::omni::cuda::fuseParallelLoops(fn, /*firstScratch=*/4, sameBuffers);
  out.scratch = {64};
  if (registers)
    mlir::omni::cuda::scratchToRegisters(fn, /*firstScratch=*/4, out.scratch);
  out.arguments = fn.getNumArguments();
  EXPECT_TRUE(succeeded(verify(module)));
  auto loops = llvm::to_vector(fn.front().getOps<scf::ParallelOp>());
  out.loops = static_cast<int>(loops.size());
  if (!loops.empty())
    loops.front().walk([&](Operation *op) {
      auto name = [](Value m) {
        return std::to_string(cast<BlockArgument>(m).getArgNumber());
      };
      if (auto store = dyn_cast<memref::StoreOp>(op))
        out.accesses.push_back("store " + name(store.getMemRef()));
      if (auto load = dyn_cast<memref::LoadOp>(op))
        out.accesses.push_back("load " + name(load.getMemRef()));
    });
  return out;
}

/// Row i of a0 folded into the f64 accumulator s[i].
const std::string kFoldRows = R"(
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %init = memref.load %s[%i] : memref<8xf64>
    %r = scf.for %j = %c0 to %c8 step %c1 iter_args(%acc = %init) -> f64 {
      %x = memref.load %a0[%i, %j] : memref<8x8xf32>
      %w = arith.extf %x : f32 to f64
      %n = arith.addf %acc, %w : f64
      scf.yield %n : f64
    }
    memref.store %r, %s[%i] : memref<8xf64>
  }
)";
/// A reduction as the lowering writes it: fill the f64 accumulator (the
/// scratch), fold each row into it, round it into the result.
const std::string kRowSum = R"(
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    memref.store %d0, %s[%i] : memref<8xf64>
  }
)" + kFoldRows + R"(
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %v = memref.load %s[%i] : memref<8xf64>
    %t = arith.truncf %v : f64 to f32
    memref.store %t, %a1[%i, %c0] : memref<8x8xf32>
  }
)";

TEST(CudaLoopFusion, AReductionsThreeLoopsBecomeOne) {
  Fused f = fuse(kRowSum);
  EXPECT_EQ(f.loops, 1);
  EXPECT_EQ(f.accesses,
            (std::vector<std::string>{"store 4", "load 4", "load 0", "store 4",
                                      "load 4", "store 1"}));
}

TEST(CudaLoopFusion, AFusedReductionsAccumulatorIsARegister) {
  // Fused, the accumulator is stored and read back by its own iteration
  // only: the scratch buffer goes, the fold reads the row and stores the
  // rounded sum.
  Fused f = fuse(kRowSum, {}, /*registers=*/true);
  EXPECT_EQ(f.loops, 1);
  EXPECT_EQ(f.accesses, (std::vector<std::string>{"load 0", "store 1"}));
  EXPECT_EQ(f.arguments, 4u);
  EXPECT_TRUE(f.scratch.empty());
}

TEST(CudaLoopFusion, AScratchBufferTwoLoopsShareStaysInMemory) {
  // Unfused (a1 may be written over a0), the rounding's loop reads the
  // accumulator the fold's loop stored: it stays a buffer.
  Fused f = fuse(kRowSum, {{0, 1}}, /*registers=*/true);
  EXPECT_EQ(f.loops, 2);
  EXPECT_EQ(f.arguments, 5u);
  EXPECT_EQ(f.scratch, (std::vector<int64_t>{64}));
}

TEST(CudaLoopFusion, AScratchElementReadBeforeItsStoreStaysInMemory) {
  // The load reads what the buffer held before the loop: no register of
  // this iteration has it.
  Fused f = fuse(R"(
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %v = memref.load %s[%i] : memref<8xf64>
    %t = arith.truncf %v : f64 to f32
    memref.store %t, %a1[%i, %c0] : memref<8x8xf32>
    memref.store %d0, %s[%i] : memref<8xf64>
  }
)",
                 {}, /*registers=*/true);
  EXPECT_EQ(f.arguments, 5u);
  EXPECT_EQ(f.accesses,
            (std::vector<std::string>{"load 4", "store 1", "store 4"}));
}

TEST(CudaLoopFusion, AResultThatMayBeOverAnInputStaysApart) {
  // With a1 written over a0, a1 (the rounding's result) is what the fold
  // reads at other elements: the fill still joins the fold, whose
  // accumulator is scratch, but the rounding stays apart.
  Fused f = fuse(kRowSum, {{0, 1}});
  EXPECT_EQ(f.loops, 2);
  EXPECT_EQ(f.accesses, (std::vector<std::string>{"store 4", "load 4", "load 0",
                                                  "store 4"}));
}

TEST(CudaLoopFusion, AnElementReadInAnotherIterationKeepsTwoLaunches) {
  // The second loop reads the first's result transposed: iteration i reads
  // what iteration j wrote.
  EXPECT_EQ(fuse(R"(
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c8) step (%c1, %c1) {
    %x = memref.load %a0[%i, %j] : memref<8x8xf32>
    memref.store %x, %a1[%i, %j] : memref<8x8xf32>
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c8) step (%c1, %c1) {
    %x = memref.load %a1[%j, %i] : memref<8x8xf32>
    memref.store %x, %a2[%i, %j] : memref<8x8xf32>
  }
)")
                .loops,
            2);
  // A shifted read, likewise.
  EXPECT_EQ(fuse(R"(
  scf.parallel (%i) = (%c0) to (%c7) step (%c1) {
    memref.store %f0, %a1[%i, %c0] : memref<8x8xf32>
  }
  scf.parallel (%i) = (%c0) to (%c7) step (%c1) {
    %n = arith.addi %i, %c1 : index
    %x = memref.load %a1[%n, %c0] : memref<8x8xf32>
    memref.store %x, %a2[%i, %c0] : memref<8x8xf32>
  }
)")
                .loops,
            2);
  // Every iteration writing one element (a column of the space unused).
  EXPECT_EQ(fuse(R"(
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c8) step (%c1, %c1) {
    memref.store %f0, %a1[%i, %c0] : memref<8x8xf32>
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c8) step (%c1, %c1) {
    %x = memref.load %a1[%i, %c0] : memref<8x8xf32>
    memref.store %x, %a2[%i, %j] : memref<8x8xf32>
  }
)")
                .loops,
            2);
}

TEST(CudaLoopFusion, ResultsOverInputsMayBeTheSameBuffer) {
  // The second loop writes a2 where the first reads a0 at other elements:
  // independent buffers, unless a2 may be written over a0.
  const char *body = R"(
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %x = memref.load %a0[%c0, %i] : memref<8x8xf32>
    memref.store %x, %a1[%i, %c0] : memref<8x8xf32>
  }
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    memref.store %f0, %a2[%i, %c0] : memref<8x8xf32>
  }
)";
  EXPECT_EQ(fuse(body).loops, 1);
  EXPECT_EQ(fuse(body, {{0, 2}}).loops, 2);
  // Another kernel's pair leaves a0 and a2 apart.
  EXPECT_EQ(fuse(body, {{3, 1}}).loops, 1);
}

TEST(CudaLoopFusion, AnInPlacePairIsOneBufferAtTheSameElements) {
  // An in-place update in two loops (as an optimizer step): the first
  // writes a temporary a3 from a0, the second writes a1 over a0 from it.
  // With a1 over a0 every element is read and written in one iteration,
  // so the loops fuse; with the first loop reading a0 at another element
  // (one the second overwrites in another iteration), they may not.
  const char *body = R"(
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c8) step (%c1, %c1) {
    %x = memref.load %a0[%i, %j] : memref<8x8xf32>
    memref.store %x, %a3[%i, %j] : memref<8x8xf32>
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c8) step (%c1, %c1) {
    %x = memref.load %a3[%i, %j] : memref<8x8xf32>
    %y = memref.load %a0[%i, %j] : memref<8x8xf32>
    %z = arith.subf %y, %x : f32
    memref.store %z, %a1[%i, %j] : memref<8x8xf32>
  }
)";
  Fused f = fuse(body, {{0, 1}});
  EXPECT_EQ(f.loops, 1);
  EXPECT_EQ(f.accesses, (std::vector<std::string>{"load 0", "store 3", "load 3",
                                                  "load 0", "store 1"}));
  std::string shifted = body;
  shifted.replace(shifted.find("%a0[%i, %j]"), 11, "%a0[%j, %i]");
  EXPECT_EQ(fuse(shifted, {{0, 1}}).loops, 2);
  EXPECT_EQ(fuse(shifted).loops, 1);
}

TEST(CudaLoopFusion, DifferentSpacesStayApart) {
  EXPECT_EQ(fuse(R"(
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    memref.store %f0, %a1[%i, %c0] : memref<8x8xf32>
  }
  scf.parallel (%i) = (%c0) to (%c7) step (%c1) {
    memref.store %f0, %a2[%i, %c0] : memref<8x8xf32>
  }
)")
                .loops,
            2);
}

TEST(CudaLoopFusion, ALoopMovesOverAnIndependentOne) {
  // The fill moves past the chunks' loop (which does not touch the
  // accumulator) to join the fold, as in a split reduction.
  Fused f = fuse(R"(
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    memref.store %d0, %s[%i] : memref<8xf64>
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c8) step (%c1, %c1) {
    %x = memref.load %a0[%i, %j] : memref<8x8xf32>
    memref.store %x, %a3[%i, %j] : memref<8x8xf32>
  }
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %init = memref.load %s[%i] : memref<8xf64>
    %x = memref.load %a3[%i, %c0] : memref<8x8xf32>
    %w = arith.extf %x : f32 to f64
    %n = arith.addf %init, %w : f64
    memref.store %n, %s[%i] : memref<8xf64>
  }
)");
  EXPECT_EQ(f.loops, 2);
  // The first loop left is the chunks'; the fill now leads the fold.
  EXPECT_EQ(f.accesses, (std::vector<std::string>{"load 0", "store 3"}));

  // An op between that depends on both keeps them apart: it reads what
  // the first writes and writes what the third reads.
  EXPECT_EQ(fuse(R"(
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    memref.store %d0, %s[%i] : memref<8xf64>
  }
  %v = memref.load %s[%c0] : memref<8xf64>
  %t = arith.truncf %v : f64 to f32
  memref.store %t, %a3[%c0, %c0] : memref<8x8xf32>
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %x = memref.load %a3[%c0, %c0] : memref<8x8xf32>
    memref.store %x, %a2[%i, %c0] : memref<8x8xf32>
  }
)")
                .loops,
            2);
}

/// Whether the first and the last of `body`'s top-level parallel loops may
/// run row by row over their first `rows` induction variables (rowLocal,
/// the row launches' rule), in the kernel of fuse() with `sameBuffers`.
bool rowLocal(const std::string &body, unsigned rows,
              std::vector<std::pair<unsigned, unsigned>> sameBuffers = {}) {
  Kernel kernel;
  func::FuncOp fn = kernel.parse(body);
  if (!fn)
    return false;
  auto loops = llvm::to_vector(fn.front().getOps<scf::ParallelOp>());
  return mlir::omni::cuda::rowLocal(fn, /*firstScratch=*/4, sameBuffers,
                                    loops.front(), loops.back(), rows);
}

/// Row i of a0 written by an elementwise loop, then summed into s[i].
const std::string kRowThenSum = R"(
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c8) step (%c1, %c1) {
    %x = memref.load %a1[%i, %j] : memref<8x8xf32>
    memref.store %x, %a0[%i, %j] : memref<8x8xf32>
  }
)" + kFoldRows;

TEST(CudaRowLaunches, ARowWrittenThenSummedStaysInItsRow) {
  EXPECT_TRUE(rowLocal(kRowThenSum, 1));
}

TEST(CudaRowLaunches, ASumOfAColumnReadsOtherRows) {
  // The sum reads a0[j, i]: row i's sum reads every row's element i.
  std::string column = kRowThenSum;
  column.replace(column.rfind("%a0[%i, %j]"), 11, "%a0[%j, %i]");
  EXPECT_FALSE(rowLocal(column, 1));
}

TEST(CudaRowLaunches, AnInPlacePairIsOneBuffer) {
  // The sum reads a2, which the plan may make a0's buffer: one memref,
  // indexed by the row at the same position, so still row-local; without
  // the pair they never overlap.
  std::string pair = kRowThenSum;
  pair.replace(pair.rfind("%a0[%i, %j]"), 11, "%a2[%i, %j]");
  EXPECT_TRUE(rowLocal(pair, 1, {{2, 0}}));
  EXPECT_TRUE(rowLocal(pair, 1));
  pair.replace(pair.find("%a2[%i, %j]"), 11, "%a2[%j, %i]");
  EXPECT_FALSE(rowLocal(pair, 1, {{2, 0}}));
  EXPECT_TRUE(rowLocal(pair, 1));
}

TEST(CudaRowLaunches, DisjointHalvesOfABufferDoNotOverlap) {
  // Two loops writing the left and right halves of a0 (a concatenation's
  // parts) touch different elements, though their first induction
  // variables index different dimensions; overlapping column ranges do
  // not.
  const std::string halves = R"(
  %l = memref.subview %a0[0, 0] [8, 4] [1, 1] : memref<8x8xf32> to memref<8x4xf32, strided<[8, 1]>>
  %r = memref.subview %a0[0, LO] [8, 4] [1, 1] : memref<8x8xf32> to memref<8x4xf32, strided<[8, 1], offset: LO>>
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c4) step (%c1, %c1) {
    %x = memref.load %a1[%i, %j] : memref<8x8xf32>
    memref.store %x, %l[%i, %j] : memref<8x4xf32, strided<[8, 1]>>
  }
  scf.parallel (%j, %i) = (%c0, %c0) to (%c4, %c8) step (%c1, %c1) {
    %x = memref.load %a2[%i, %j] : memref<8x8xf32>
    memref.store %x, %r[%i, %j] : memref<8x4xf32, strided<[8, 1], offset: LO>>
  }
)";
  auto at = [&](const char *lo) {
    std::string body = halves;
    for (size_t p; (p = body.find("LO")) != std::string::npos;)
      body.replace(p, 2, lo);
    return body;
  };
  EXPECT_TRUE(rowLocal(at("4"), 1));
  EXPECT_FALSE(rowLocal(at("3"), 1));
}

} // namespace
