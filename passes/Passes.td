//===- Passes.td - omni passes ------------------------------*- tablegen -*-===//
//
// Every omni pass, grouped by pipeline phase (design.md section 2). The
// pipeline that runs them in order is buildOmniPipeline() in Pipelines.cpp,
// registered as `omni-pipeline` so lit can run exactly what omnic runs.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_PASSES_TD
#define OMNI_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Lowering of composite ops
//===----------------------------------------------------------------------===//

def OmniDecomposePass : Pass<"omni-decompose"> {
  let summary = "rewrite composite ops into omni primitives";
  let description = [{
    Replaces each composite op by its documented decomposition into
    primitives, so later passes and backends see only primitives and the
    library ops (matmul, conv2d, attention).

    Before:
    ```mlir
    %y = omni.silu %x : tensor<4xf32>
    ```
    After:
    ```mlir
    %s = omni.logistic %x : tensor<4xf32>
    %y = omni.mul %x, %s : tensor<4xf32>
    ```
  }];
  let options = [
    Option<"decomposeLibraryOps", "decompose-library-ops", "bool",
           /*default=*/"false",
           "also decompose the ops kept for libraries (attention), for "
           "backends without a kernel for them and for testing">
  ];
  let dependentDialects = ["::mlir::omni::OmniDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // OMNI_PASSES_TD
