//===- OmniDialectTest.cpp - unit tests of the omni dialect C++ API -------===//
//
// What lit cannot reach: building IR through the C++ API (the builder API of
// frontends relies on these inferred-type builders), shape inference called
// directly, folding through OpBuilder::createOrFold, and the schedule folder
// giving the docs/flowgrpo-math.md numbers.
//
//===----------------------------------------------------------------------===//

#include "dialects/omni/OmniOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::omni;

namespace {

class OmniDialectTest : public ::testing::Test {
protected:
  OmniDialectTest() {
    DialectRegistry registry;
    registerOmniDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  RankedTensorType f32(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, Float32Type::get(&context));
  }

  /// A module with one function `f` of the given argument types whose body
  /// `build` fills; returns the verified module (or null).
  OwningOpRef<ModuleOp>
  buildFunction(TypeRange args,
                function_ref<Value(OpBuilder &, Location, ValueRange)> build) {
    OpBuilder b(&context);
    Location loc = b.getUnknownLoc();
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    b.setInsertionPointToEnd(module->getBody());
    auto fn = func::FuncOp::create(b, loc, "f", b.getFunctionType(args, {}));
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToEnd(entry);
    Value result = build(b, loc, entry->getArguments());
    func::ReturnOp::create(b, loc, result);
    fn.setType(b.getFunctionType(args, result.getType()));
    return module;
  }

  MLIRContext context;
};

TEST_F(OmniDialectTest, InferredBuildersComputeShapes) {
  OwningOpRef<ModuleOp> module = buildFunction(
      {f32({2, 3, 8}), f32({4, 8}), f32({4})},
      [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
        Value y = LinearOp::create(b, loc, args[0], args[1], args[2]);
        EXPECT_EQ(y.getType(), f32({2, 3, 4}));
        Value m = MatmulOp::create(b, loc, y, y, /*transpose_lhs=*/false,
                                   /*transpose_rhs=*/true);
        EXPECT_EQ(m.getType(), f32({2, 3, 3}));
        Value t =
            TransposeOp::create(b, loc, m, b.getDenseI64ArrayAttr({2, 0, 1}));
        EXPECT_EQ(t.getType(), f32({3, 2, 3}));
        return ReduceOp::create(b, loc,
                                ReduceKindAttr::get(&context, ReduceKind::sum),
                                t, b.getDenseI64ArrayAttr({0, 2}));
      });
  ASSERT_TRUE(succeeded(verify(*module)));
  auto fn = cast<func::FuncOp>(module->getBody()->front());
  EXPECT_EQ(fn.getFunctionType().getResult(0), f32({2}));
}

TEST_F(OmniDialectTest, InferenceReportsBadShapesWithLocation) {
  SmallVector<Type> types;
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  OpBuilder b(&context);
  OwningOpRef<ModuleOp> module = ModuleOp::create(b.getUnknownLoc());
  b.setInsertionPointToEnd(module->getBody());
  auto fn =
      func::FuncOp::create(b, b.getUnknownLoc(), "g",
                           b.getFunctionType({f32({2, 3}), f32({4, 5})}, {}));
  Block *entry = fn.addEntryBlock();
  MatmulOp::Adaptor adaptor(entry->getArguments());
  EXPECT_TRUE(failed(
      MatmulOp::inferReturnTypes(&context, b.getUnknownLoc(), adaptor, types)));
  EXPECT_EQ(message, "'omni.matmul' op contraction dimensions differ: lhs "
                     "2x3 contracts 3 but rhs 4x5 contracts 4");
}

TEST_F(OmniDialectTest, FlowScheduleFoldsToTheSd35Table) {
  OpBuilder b(&context);
  OwningOpRef<ModuleOp> module = ModuleOp::create(b.getUnknownLoc());
  b.setInsertionPointToEnd(module->getBody());
  auto op = FlowScheduleOp::create(
      b, b.getUnknownLoc(),
      ScheduleKindAttr::get(&context, ScheduleKind::static_shift),
      b.getI64IntegerAttr(10), b.getF64FloatAttr(3.0), nullptr,
      b.getF64FloatAttr(0.5), b.getF64FloatAttr(0.9), b.getI64IntegerAttr(256),
      b.getI64IntegerAttr(8192), nullptr);
  SmallVector<OpFoldResult> folded;
  ASSERT_TRUE(succeeded(op->fold(folded)));
  ASSERT_EQ(folded.size(), 2u);
  auto timesteps = cast<DenseElementsAttr>(cast<Attribute>(folded[1]));
  // docs/flowgrpo-math.md section 8, SD3.5 schedule, shift 3, N = 10.
  const float expected[] = {
      1000.0f,      960.1293335f, 913.3489990f, 857.6923218f, 790.3682861f,
      707.2785034f, 602.1505737f, 464.8760376f, 278.0487976f, 8.9285717f};
  auto values = llvm::to_vector(timesteps.getValues<float>());
  ASSERT_EQ(values.size(), 10u);
  for (int i = 0; i < 10; ++i)
    EXPECT_NEAR(values[i], expected[i], 1e-6 * expected[i]) << "step " << i;
  auto sigmas = llvm::to_vector(
      cast<DenseElementsAttr>(cast<Attribute>(folded[0])).getValues<float>());
  ASSERT_EQ(sigmas.size(), 11u);
  EXPECT_EQ(sigmas.front(), 1.0f);
  EXPECT_EQ(sigmas.back(), 0.0f);
}

TEST_F(OmniDialectTest, CreateOrFoldRemovesIdentities) {
  OwningOpRef<ModuleOp> module = buildFunction(
      {f32({4, 2})}, [&](OpBuilder &b, Location loc, ValueRange args) {
        Value x = args[0];
        Value same =
            b.createOrFold<TransposeOp>(loc, x, b.getDenseI64ArrayAttr({0, 1}));
        EXPECT_EQ(same, x);
        Value n = NegOp::create(b, loc, x);
        Value nn = b.createOrFold<NegOp>(loc, n);
        EXPECT_EQ(nn, x);
        return nn;
      });
  EXPECT_TRUE(succeeded(verify(*module)));
}

TEST_F(OmniDialectTest, ParsedProgramVerifiesAndPrintsCustomForm) {
  const char *source = R"mlir(
    omni.mesh @mesh axes = ["dp"] shape = [2]
    func.func @loss(%w: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<f32> {
      %y = omni.mul %w, %x : tensor<4xf32>
      %s = omni.reduce sum %y dims = [0] : tensor<4xf32> -> tensor<f32>
      return %s : tensor<f32>
    }
    func.func @step(%w: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
      %g = omni.grad @loss(%w, %x) wrt = [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %r = omni.all_reduce mean %g over @mesh ["dp"] : tensor<4xf32>
      return %r : tensor<4xf32>
    }
  )mlir";
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(source, ParserConfig(&context));
  ASSERT_TRUE(module);
  ASSERT_TRUE(succeeded(verify(*module)));
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  EXPECT_NE(text.find("omni.grad @loss(%arg0, %arg1) wrt = [0]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("omni.all_reduce mean"), std::string::npos) << text;
}

} // namespace
