// RUN: omni-eval %s --function=step --ranks 2 --input=4x2xf32=1,2,3,4,5,6,7,8 \
// RUN:   --input=2x2xf32=1,0,0,2 | FileCheck %s
// RUN: omni-eval %S/Inputs/spmd-unsharded.mlir --compare-sharded=%s --ranks 2 \
// RUN:   --function=step --input=4x2xf32=1,2,3,4,5,6,7,8 \
// RUN:   --input=2x2xf32=1,0,0,2 | FileCheck %s --check-prefix=AGREE
// RUN: not omni-eval %S/Inputs/spmd-unsharded.mlir --compare-sharded=%s \
// RUN:   --ranks 2 --function=wrong --input=4x2xf32=1,2,3,4,5,6,7,8 \
// RUN:   --input=2x2xf32=1,0,0,2 2>&1 | FileCheck %s --check-prefix=DIFFER
// RUN: not omni-eval %s --function=step --ranks 4 --input=4x2xf32=1,2,3,4,5,6,7,8 \
// RUN:   --input=2x2xf32=1,0,0,2 2>&1 | FileCheck %s --check-prefix=WORLD
// RUN: not omni-eval %s --function=step --ranks 2 --input=4x2xf32=1,2,3,4,5,6,7,8 \
// RUN:   --input=2x2xf32=1,0,0,2 --output=@%t.npy 2>&1 \
// RUN:   | FileCheck %s --check-prefix=OUTPUT
// RUN: not omni-eval %s --function=step --ranks 0 2>&1 \
// RUN:   | FileCheck %s --check-prefix=ZERO
// RUN: not omni-eval %S/Inputs/spmd-unsharded.mlir --compare-sharded=%t.none.mlir \
// RUN:   --ranks 2 --function=step 2>&1 | FileCheck %s --check-prefix=NOFILE

// A data-parallel linear layer on dp=2, as omni-shard{trace} writes it: x
// is split on the batch (omni-eval gives each rank its rows of the global
// --input), the weight w = diag(1, 2) is replicated, y = x w keeps the
// batch split and the weight gradient x^T y is partial until the
// all_reduce. With x = [[1,2],[3,4],[5,6],[7,8]]: y = [[1,4],[3,8],[5,12],
// [7,16]], x^T y = [[84, 200], [100, 240]].

// CHECK: rank 0 result[0]: tensor<2x2xf32>={{\[\[1 4\]\[3 8\]\]}}
// CHECK-NEXT: rank 0 result[1]: tensor<2x2xf32>={{\[\[84 200\]\[100 240\]\]}}
// CHECK-NEXT: rank 0 result[2]: tensor<i64>=0
// CHECK-NEXT: rank 1 result[0]: tensor<2x2xf32>={{\[\[5 12\]\[7 16\]\]}}
// CHECK-NEXT: rank 1 result[1]: tensor<2x2xf32>={{\[\[84 200\]\[100 240\]\]}}
// CHECK-NEXT: rank 1 result[2]: tensor<i64>=1

// AGREE: 2 traced values agree

// The all_reduce of @wrong averages: the partial gradient is right, the
// scaled gradient (trace 3) is half the unsharded one.
// DIFFER: omni-eval: the sharded program differs: trace 3 'omni.add' at {{.*}}spmd.mlir:[[@LINE+26]]:8 result #0: rank 0's value differs from the unsharded value by 0.5 (tolerance 1e-05) at [0, 0]: sharded 84, unsharded 168

// WORLD: omni-eval: {{.*}}spmd.mlir:[[@LINE+8]]:1: mesh @mesh has 2 ranks but the evaluation runs 4

// ZERO: omni-eval: --ranks must be at least 1, found 0

// NOFILE: omni-eval: cannot open input file '{{.*}}none.mlir'

// OUTPUT: omni-eval: --output needs --ranks 1 (with --ranks 2 every rank's results are printed)

omni.mesh @mesh axes = ["dp"] shape = [2]

func.func @step(%x: tensor<2x2xf32> {omni.sharding = #omni.sharding<@mesh, [["dp"], []]>, omni.global_type = tensor<4x2xf32>},
                %w: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<i64>) {
  %y = omni.matmul %x, %w {omni.trace = 1 : i64, omni.result_shardings = [#omni.sharding<@mesh, [["dp"], []]>]} : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %gp = omni.matmul %x, %y transpose_lhs {omni.trace = 2 : i64, omni.result_shardings = ["partial:sum:dp"]} : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %g = omni.all_reduce sum %gp over @mesh ["dp"] : tensor<2x2xf32>
  %k = omni.axis_index over @mesh ["dp"] : tensor<i64>
  return %y, %g, %k : tensor<2x2xf32>, tensor<2x2xf32>, tensor<i64>
}

func.func @wrong(%x: tensor<2x2xf32> {omni.sharding = #omni.sharding<@mesh, [["dp"], []]>, omni.global_type = tensor<4x2xf32>},
                 %w: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %y = omni.matmul %x, %w {omni.trace = 1 : i64, omni.result_shardings = [#omni.sharding<@mesh, [["dp"], []]>]} : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %gp = omni.matmul %x, %y transpose_lhs {omni.trace = 2 : i64, omni.result_shardings = ["partial:sum:dp"]} : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %g = omni.all_reduce mean %gp over @mesh ["dp"] : tensor<2x2xf32>
  %r = omni.add %g, %g {omni.trace = 3 : i64, omni.result_shardings = [#omni.sharding<@mesh, [[], []]>]} : tensor<2x2xf32>
  return %r : tensor<2x2xf32>
}
