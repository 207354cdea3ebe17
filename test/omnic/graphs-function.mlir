// omnirun --function with --graphs on (docs/backend.md, "Graphs"): the
// loop is captured on the cpu driver, replayed as recorded calls, and gives
// the same result as without graphs.
// RUN: omnic %s -o %t.bin
// RUN: omnirun %t.bin --function=f --graphs off --input=4xf32=1,2,3,-4 > %t.off
// RUN: env OMNI_LOG=info omnirun %t.bin --function=f --graphs on --input=4xf32=1,2,3,-4 2> %t.log > %t.on
// RUN: FileCheck %s --check-prefix=LOG < %t.log
// RUN: diff %t.off %t.on
// RUN: FileCheck %s < %t.on
// x doubled 3 times, plus 1 each time: 8x + 7.
// LOG: (Loop): captured 3 commands into a graph
// CHECK: result[0]: tensor<4xf32>=[15 23 31 -25]

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %one = omni.constant dense<1.0> : tensor<4xf32>
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%acc = %x) -> (tensor<4xf32>) {
    %d = omni.add %acc, %acc : tensor<4xf32>
    %e = omni.add %d, %one : tensor<4xf32>
    scf.yield %e : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}
