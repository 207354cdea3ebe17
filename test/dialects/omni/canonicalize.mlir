// RUN: omni-opt %s -canonicalize -split-input-file | FileCheck %s

// Tests that x + 0, x - 0, x * 1 and x / 1 fold to x.
// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT: return %[[X]], %[[X]], %[[X]], %[[X]]
func.func @identities(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %zero = omni.constant dense<0.0> : tensor<4xf32>
  %one = omni.constant dense<1.0> : tensor<4xf32>
  %a = omni.add %zero, %x : tensor<4xf32>
  %s = omni.sub %x, %zero : tensor<4xf32>
  %m = omni.mul %x, %one : tensor<4xf32>
  %d = omni.div %x, %one : tensor<4xf32>
  return %a, %s, %m, %d : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that x * 0 and x - x are kept: they are not 0 for NaN or inf.
// CHECK-LABEL: func.func @negative_not_exact_for_nan
// CHECK: omni.mul
// CHECK: omni.sub
func.func @negative_not_exact_for_nan(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %zero = omni.constant dense<0.0> : tensor<4xf32>
  %m = omni.mul %x, %zero : tensor<4xf32>
  %s = omni.sub %x, %x : tensor<4xf32>
  return %m, %s : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that elementwise arithmetic on constants folds.
// CHECK-LABEL: func.func @constant_arith
// CHECK-NEXT: %[[C:.*]] = omni.constant dense<[4.000000e+00, 1.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: %[[I:.*]] = omni.constant dense<[6, 10]> : tensor<2xi64>
// CHECK-NEXT: return %[[C]], %[[I]]
func.func @constant_arith() -> (tensor<2xf32>, tensor<2xi64>) {
  %a = omni.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %b = omni.constant dense<[3.0, -1.0]> : tensor<2xf32>
  %c = omni.add %a, %b : tensor<2xf32>
  %n = omni.neg %c : tensor<2xf32>
  %nn = omni.neg %n : tensor<2xf32>
  %i = omni.constant dense<[2, 5]> : tensor<2xi64>
  %j = omni.constant dense<[3, 2]> : tensor<2xi64>
  %k = omni.mul %i, %j : tensor<2xi64>
  %l = omni.sub %k, %i : tensor<2xi64>
  %m = omni.add %l, %i : tensor<2xi64>
  return %nn, %m : tensor<2xf32>, tensor<2xi64>
}

// -----

// Tests that neg(neg(x)) folds to x.
// CHECK-LABEL: func.func @double_neg
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT: return %[[X]]
func.func @double_neg(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = omni.neg %x : tensor<4xf32>
  %1 = omni.neg %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Tests that shape ops that change nothing fold away.
// CHECK-LABEL: func.func @shape_identities
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
func.func @shape_identities(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %r = omni.reshape %x : tensor<2x3xf32> -> tensor<2x3xf32>
  %t = omni.transpose %x, permutation = [0, 1] : tensor<2x3xf32> -> tensor<2x3xf32>
  %s = omni.slice %x [0:2:1, 0:3:1] : tensor<2x3xf32> -> tensor<2x3xf32>
  %p = omni.pad %x low = [0, 0] high = [0, 0] value = 0.0 : tensor<2x3xf32> -> tensor<2x3xf32>
  %b = omni.broadcast_in_dim %x, dims = [0, 1] : tensor<2x3xf32> -> tensor<2x3xf32>
  %c = omni.cast %x : tensor<2x3xf32> -> tensor<2x3xf32>
  %k = omni.concat %x dim = 0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %e = omni.reduce sum %x dims = [] : tensor<2x3xf32> -> tensor<2x3xf32>
  return %r, %t, %s, %p, %b, %c, %k, %e : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Tests that a slice with stride 2 over a whole dimension is not an identity.
// CHECK-LABEL: func.func @negative_strided_slice
// CHECK: omni.slice
func.func @negative_strided_slice(%x: tensor<4xf32>) -> tensor<2xf32> {
  %s = omni.slice %x [0:4:2] : tensor<4xf32> -> tensor<2xf32>
  return %s : tensor<2xf32>
}

// -----

// Tests that chains of reshapes and of transposes merge into one op.
// CHECK-LABEL: func.func @merge_chains
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[R:.*]] = omni.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<24xf32>
// CHECK-NEXT: %[[T:.*]] = omni.transpose %[[X]], permutation = [1, 2, 0] : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
// CHECK-NEXT: return %[[R]], %[[T]]
func.func @merge_chains(%x: tensor<2x3x4xf32>) -> (tensor<24xf32>, tensor<3x4x2xf32>) {
  %r1 = omni.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %r2 = omni.reshape %r1 : tensor<6x4xf32> -> tensor<24xf32>
  %t1 = omni.transpose %x, permutation = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %t2 = omni.transpose %t1, permutation = [2, 0, 1] : tensor<4x2x3xf32> -> tensor<3x4x2xf32>
  return %r2, %t2 : tensor<24xf32>, tensor<3x4x2xf32>
}

// -----

// Tests that shape ops of splat constants fold to splat constants.
// CHECK-LABEL: func.func @splat_shapes
// CHECK-NEXT: %[[A:.*]] = omni.constant dense<2.000000e+00> : tensor<3x2xf32>
// CHECK-NEXT: %[[B:.*]] = omni.constant dense<2.000000e+00> : tensor<4x6xf32>
// CHECK-NEXT: return %[[A]], %[[B]]
func.func @splat_shapes() -> (tensor<3x2xf32>, tensor<4x6xf32>) {
  %c = omni.constant dense<2.0> : tensor<6xf32>
  %r = omni.reshape %c : tensor<6xf32> -> tensor<2x3xf32>
  %t = omni.transpose %r, permutation = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  %b = omni.broadcast_in_dim %c, dims = [1] : tensor<6xf32> -> tensor<4x6xf32>
  return %t, %b : tensor<3x2xf32>, tensor<4x6xf32>
}

// -----

// Tests that select with a constant predicate or equal branches folds.
// CHECK-LABEL: func.func @select_folds
// CHECK-SAME: (%[[A:.*]]: tensor<4xf32>, %[[B:.*]]: tensor<4xf32>, %[[P:.*]]: tensor<4xi1>)
// CHECK-NEXT: return %[[B]], %[[A]]
func.func @select_folds(%a: tensor<4xf32>, %b: tensor<4xf32>, %p: tensor<4xi1>) -> (tensor<4xf32>, tensor<4xf32>) {
  %false = omni.constant dense<false> : tensor<4xi1>
  %s = omni.select %false, %a, %b : tensor<4xi1>, tensor<4xf32>
  %same = omni.select %p, %a, %a : tensor<4xi1>, tensor<4xf32>
  return %s, %same : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that the SD3.5 sigma schedule folds to its table (docs/flowgrpo-math.md
// section 8: shift 3, N = 10).
// CHECK-LABEL: func.func @schedule
// CHECK-DAG: omni.constant dense<[1.000000e+00, 0.96012932, 0.913348972, 0.857692301, 0.790368258, 0.70727849, 0.602150559, 0.464876026, 0.278048784, 0.00892857183, 0.000000e+00]> : tensor<11xf32>
// CHECK-DAG: omni.constant dense<[1.000000e+03, 960.129333, 913.348999, 857.692321, 790.368286, 707.278503, 602.150574, 464.876038, 278.048798, 8.9285717]> : tensor<10xf32>
// CHECK-NOT: omni.flow_schedule
func.func @schedule() -> (tensor<11xf32>, tensor<10xf32>) {
  %s, %t = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
  return %s, %t : tensor<11xf32>, tensor<10xf32>
}
