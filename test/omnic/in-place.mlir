// Tests the cpu kernels of a fusion whose result the memory plan writes over
// one of its inputs (docs/backend.md, "In place"). %a (a matmul result) dies
// at the first fusion, so the plan puts that fusion's result over it and
// says so (omni.overwrites); the second fusion computes the same thing from
// the argument %x, which is not donated, so it writes elsewhere. Both run
// the one kernel the two fusions share:
// - its wrapper compares the two pointers and, in place, calls the inlined
//   body on one pointer: a vector loop with no run-time overlap check (the
//   check fails when input and result are the same bytes, and the scalar
//   loop ran); only the other call keeps its check;
// - no kernel allocates a temporary for its result: results are computed
//   straight into the out-parameters, static and dynamic shapes alike;
// - both results are x + tanh(x) / 2 (w is the identity), in f32:
//   1 + tanh(1) / 2 = 1.3807970779..., 2 + tanh(2) / 2 = 2.4820137900...,
//   0.5 + tanh(0.5) / 2 = 0.7310585786..., 3 + tanh(3) / 2 = 3.4975273768...
// RUN: omnic %s --emit=plan-memory | FileCheck %s --check-prefix=PLAN
// RUN: omnic %s --emit=llvm --target-cpu=haswell | FileCheck %s --check-prefix=LLVM
// RUN: omnic %s --emit=llvm --target-cpu=haswell | grep -c '^vector.memcheck' | FileCheck %s --check-prefix=CHECKS
// RUN: omnic %s -o %t.bin
// RUN: omnirun %t.bin --function main --input="2x4xf32=0 1 -1 2 0.5 -0.5 3 -3" --input="4x4xf32=1 0 0 0 0 1 0 0 0 0 1 0 0 0 0 1" | FileCheck %s

// PLAN: omni.fusion(%0) {omni.offsets = array<i64: 0>, omni.overwrites = array<i64: 0>}
// PLAN: omni.fusion(%arg0) {omni.offsets = array<i64: 64>} :

// LLVM-NOT: @malloc
// LLVM: define void @omni_kernel_0(
// LLVM: entry:
// LLVM: %[[SAME:.*]] = icmp eq ptr
// LLVM: br i1 %[[SAME]], label %in_place, label %other
// LLVM: in_place:
// LLVM: {{^}}run: {{.*}}; preds = %in_place
// LLVM-NOT: memcheck
// LLVM: fmul <8 x float>
// LLVM: {{^}}run1: {{.*}}; preds = %other
// LLVM-NOT: @malloc
// CHECKS: {{^}}1{{$}}

// CHECK: result[0]: tensor<2x4xf32>={{\[\[}}0 1.38079715 -1.38079715 2.4820137{{\]\[}}0.731058598 -0.731058598 3.49752736 -3.49752736{{\]\]}}
// CHECK: result[1]: tensor<2x4xf32>={{\[\[}}0 1.38079715 -1.38079715 2.4820137{{\]\[}}0.731058598 -0.731058598 3.49752736 -3.49752736{{\]\]}}

func.func @main(%x: tensor<2x4xf32>, %w: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %a = omni.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %h = omni.constant dense<0.5> : tensor<2x4xf32>
  %t = omni.tanh %a : tensor<2x4xf32>
  %m = omni.mul %t, %h : tensor<2x4xf32>
  %r = omni.add %m, %a : tensor<2x4xf32>
  %t2 = omni.tanh %x : tensor<2x4xf32>
  %m2 = omni.mul %t2, %h : tensor<2x4xf32>
  %r2 = omni.add %m2, %x : tensor<2x4xf32>
  return %r, %r2 : tensor<2x4xf32>, tensor<2x4xf32>
}
