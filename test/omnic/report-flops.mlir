// omnic --report-flops (passes/FlopCount.h; docs/performance.md, "Counting
// FLOPs"): the counts of a small program, by hand, the same before and after
// the pipeline (omni-decompose, omni-fuse and the memory plan change no
// arithmetic here). A callee counts where it is called; a private function
// is not reported on its own.
// RUN: omnic %s --emit=cleanup --report-flops 2>&1 >/dev/null | FileCheck %s
// RUN: omnic %s --emit=plan-memory --report-flops 2>&1 >/dev/null | FileCheck %s
// RUN: omnic %s -o %t.bin --report-flops 2>&1 | FileCheck %s
//
// matmul 5x2x3 . (4x3)^T: 2 B M N K = 2 * 5 * 2 * 4 * 3 = 240.
// attention B=1 H=2 Sq=Sk=6 D=Dv=8: 72 scores; 2*72*8 + 2*72*8 + 5*72 = 2664.
// conv2d 1x4x8x8 * 8x4x3x3 -> 1x8x6x6: 2 * 288 * 4*3*3 = 20736.
// elementwise: the loop's add, 3 trips of 4 (rollout), the callee's exp of
//   4 (loss), the add of 4 (decode), the transpose 0; reduction: 12 (loss).
// Total: 240 + 2664 + 20736 + 12 + 4 + 4 + 12 = 23672.
// CHECK:      @f: 23672 FLOPs (matmul 240, attention 2664, conv2d 20736, elementwise 20, reduction 12)
// CHECK-NEXT:   phase rollout: 252 FLOPs (matmul 240, attention 0, conv2d 0, elementwise 12, reduction 0)
// CHECK-NEXT:   phase loss: 2680 FLOPs (matmul 0, attention 2664, conv2d 0, elementwise 4, reduction 12)
// CHECK-NEXT:   phase decode: 20740 FLOPs (matmul 0, attention 0, conv2d 20736, elementwise 4, reduction 0)
// CHECK-NEXT:   loop loc("rollout"): 3 trips of 4 FLOPs (matmul 0, attention 0, conv2d 0, elementwise 4, reduction 0)
// CHECK-NOT: @g
func.func private @g(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = omni.exp %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @f(%a: tensor<5x2x3xf32>, %b: tensor<4x3xf32>, %q: tensor<1x2x6x8xf32>,
             %x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>,
             %v: tensor<4xf32>, %r: tensor<4x3xf32>)
    -> (tensor<5x2x4xf32>, tensor<4xf32>, tensor<1x2x6x8xf32>, tensor<4xf32>,
        tensor<1x8x6x6xf32>, tensor<4xf32>, tensor<3x4xf32>, tensor<4xf32>) {
  %m = omni.matmul %a, %b transpose_rhs : tensor<5x2x3xf32>, tensor<4x3xf32> -> tensor<5x2x4xf32> loc("rollout")
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %acc = scf.for %i = %c0 to %c3 step %c1 iter_args(%s = %v) -> (tensor<4xf32>) {
    %n = omni.add %s, %v : tensor<4xf32>
    scf.yield %n : tensor<4xf32>
  } loc("rollout")
  %att = omni.attention %q, %q, %q : (tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) -> tensor<1x2x6x8xf32> loc("loss")
  %e = func.call @g(%v) : (tensor<4xf32>) -> tensor<4xf32> loc("loss")
  %sum = omni.reduce sum %r dims = [1] : tensor<4x3xf32> -> tensor<4xf32> loc("loss")
  %conv = omni.conv2d %x, %w : tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32> -> tensor<1x8x6x6xf32> loc("decode")
  %d = omni.add %v, %v : tensor<4xf32> loc("decode")
  %t = omni.transpose %r, permutation = [1, 0] : tensor<4x3xf32> -> tensor<3x4xf32> loc("decode")
  return %m, %acc, %att, %e, %conv, %d, %t, %sum : tensor<5x2x4xf32>, tensor<4xf32>, tensor<1x2x6x8xf32>, tensor<4xf32>, tensor<1x8x6x6xf32>, tensor<4xf32>, tensor<3x4xf32>, tensor<4xf32>
}
