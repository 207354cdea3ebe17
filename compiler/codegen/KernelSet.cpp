//===- KernelSet.cpp - the distinct kernels of a program ------------------===//
//
// Each omni.fusion is built as `omni_new` in the kernel module, printed
// under that fixed name together with its operand and result types, and
// the text is the key: a fusion whose key was seen reuses that kernel and
// its function is erased; a new one is renamed `omni_kernel_<k>_impl`.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/KernelSet.h"
#include "compiler/codegen/KernelBuilder.h"

#include "dialects/omni/OmniOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::omni;

FailureOr<KernelSet> mlir::omni::buildKernelSet(ModuleOp program,
                                                bool splitRows) {
  KernelSet set;
  set.module = ModuleOp::create(program.getLoc());
  ModuleOp kernels = *set.module;
  // Identical fusions (every transformer block, every unrolled step) share
  // one kernel: the key is the kernel function's text under a fixed name.
  llvm::StringMap<unsigned> kernelByText;
  WalkResult walk = program.walk([&](FusionOp fusion) {
    bool isFlat = isFlatElementwise(fusion);
    std::optional<RowSplit> rows;
    if (!isFlat && splitRows)
      rows = planRowSplit(fusion);
    if (failed(isFlat ? buildFlatKernelFunction(fusion, kernels, "omni_new")
               : rows
                   ? buildRowKernelFunction(fusion, *rows, kernels, "omni_new")
                   : buildKernelFunction(fusion, kernels, "omni_new")))
      return WalkResult::interrupt();
    auto fn = dyn_cast<func::FuncOp>(kernels.getBody()->back());
    if (!fn || fn.getSymName() != "omni_new")
      fn = kernels.lookupSymbol<func::FuncOp>("omni_new");
    std::string text;
    {
      llvm::raw_string_ostream os(text);
      // Flat kernels take dynamic 1-D buffers: the static types (whose
      // element counts the targets bake in) are part of the key.
      // A row-split kernel's item types are in its text; its grid is not.
      os << (isFlat ? "flat" : rows ? "rows" : "whole");
      if (rows)
        os << " " << rows->grid;
      for (Type t : fusion->getOperandTypes())
        os << " " << t;
      for (Type t : fusion->getResultTypes())
        os << " " << t;
      fn->print(os, OpPrintingFlags().useLocalScope());
    }
    auto [it, inserted] = kernelByText.try_emplace(
        text, static_cast<unsigned>(set.kernels.size()));
    set.kernelOf[fusion] = it->second;
    auto addOverwrites = [&](KernelDef &def) {
      auto attr = fusion->getAttrOfType<DenseI64ArrayAttr>("omni.overwrites");
      if (!attr)
        return;
      std::vector<int64_t> pattern(attr.asArrayRef().begin(),
                                   attr.asArrayRef().end());
      if (!llvm::is_contained(def.overwrites, pattern))
        def.overwrites.push_back(std::move(pattern));
    };
    if (!inserted) {
      fn.erase();
      addOverwrites(set.kernels[it->second]);
      return WalkResult::advance();
    }
    KernelDef def;
    def.symbol = "omni_kernel_" + std::to_string(set.kernels.size());
    fn.setSymName(def.symbol + "_impl");
    def.flat = isFlat;
    for (Type t : fusion.getInputs().getTypes())
      def.operands.push_back(cast<RankedTensorType>(t));
    for (Type t : fusion.getResultTypes())
      def.results.push_back(cast<RankedTensorType>(t));
    if (isFlat)
      def.elements = def.results.front().getNumElements();
    if (rows)
      def.rows = std::move(*rows);
    addOverwrites(def);
    set.kernels.push_back(std::move(def));
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  return set;
}

// canonicalizeConstantGlobals: see KernelSet.h.
void mlir::omni::canonicalizeConstantGlobals(ModuleOp kernels) {
  llvm::StringMap<memref::GlobalOp> byName;
  for (auto global : kernels.getOps<memref::GlobalOp>())
    byName[global.getSymName()] = global;
  SmallVector<memref::GlobalOp> order;
  llvm::DenseMap<Operation *, StringAttr> newName;
  MLIRContext *ctx = kernels.getContext();
  kernels.walk([&](memref::GetGlobalOp get) {
    auto it = byName.find(get.getName());
    if (it == byName.end())
      return;
    memref::GlobalOp global = it->second;
    auto [slot, inserted] = newName.try_emplace(global.getOperation());
    if (inserted) {
      slot->second =
          StringAttr::get(ctx, "omni_constant_" + std::to_string(order.size()));
      order.push_back(global);
    }
    get.setNameAttr(FlatSymbolRefAttr::get(slot->second));
  });
  for (auto &entry : byName)
    if (!newName.count(entry.second.getOperation()) && entry.second.isPrivate())
      entry.second.erase();
  Block *body = kernels.getBody();
  for (memref::GlobalOp global : llvm::reverse(order)) {
    global.setSymName(newName[global.getOperation()]);
    global->moveBefore(&body->front());
  }
}

// copiesToLinalg: see KernelSet.h.
void mlir::omni::copiesToLinalg(ModuleOp kernels) {
  kernels.walk([](memref::CopyOp copy) {
    OpBuilder b(copy);
    linalg::CopyOp::create(b, copy.getLoc(), copy.getSource(),
                           copy.getTarget());
    copy.erase();
  });
}
