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
// Autodiff
//===----------------------------------------------------------------------===//

def OmniAutodiffPass : Pass<"omni-autodiff", "::mlir::ModuleOp"> {
  let summary = "expand grad / value_and_grad into reverse-mode IR";
  let description = [{
    Replaces each `omni.grad` / `omni.value_and_grad` by a call to a
    generated private function `@<callee>_grad_<wrt...>` (or
    `_value_and_grad_`) that runs the callee forward and then the adjoint
    program built from the ops' VJP rules (VJPOpInterface):

    1. clone the callee; inline every func.call in it (model calls);
    2. fully unroll every scf.for (the trip count must be static);
    3. activity analysis: a value is active when it is a float tensor that
       depends on a `wrt` argument and the loss depends on it; frozen
       weights, data and noise get no adjoint code;
    4. walk the ops backward from the loss (adjoint 1), asking each active
       op for the adjoints of its operands and summing the adjoints of
       values used several times (fan-out);
    5. return the adjoints of the `wrt` arguments (zeros for an argument
       the loss does not depend on) and remove dead code.

    An active op with no VJP rule (host_call, random numbers, integer math)
    is an error naming the op and the argument. By default every forward
    value the backward program reads is saved; `recompute` names functions
    (for example a transformer block) whose ops are instead recomputed
    right before the backward program needs them (docs/autodiff.md).

    Before:
    ```mlir
    %g = omni.grad @loss(%w, %x) wrt = [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    ```
    After:
    ```mlir
    %g = call @loss_grad_0(%w, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    ```
  }];
  let options = [
    ListOption<"recompute", "recompute", "std::string",
               "functions whose forward ops the backward program recomputes "
               "instead of saving (rematerialization)">
  ];
  let dependentDialects = ["::mlir::omni::OmniDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::tensor::TensorDialect"];
}

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
