// RUN: omni-opt %s -omni-split-reductions -split-input-file | FileCheck %s

// Tests that a bias gradient (a sum over the rows of a [2048, 256]
// gradient) becomes 16 groups of 128 rows summed in f64, then the 16
// partial sums, cast back once.
// CHECK-LABEL: func.func @bias_grad
// CHECK: %[[R:.*]] = omni.reshape %{{.*}} : tensor<2048x256xf32> -> tensor<16x128x256xf32>
// CHECK: %[[W:.*]] = omni.cast %[[R]] : tensor<16x128x256xf32> -> tensor<16x128x256xf64>
// CHECK: %[[P:.*]] = omni.reduce sum %[[W]] dims = [1] : tensor<16x128x256xf64> -> tensor<16x256xf64>
// CHECK: %[[T:.*]] = omni.reduce sum %[[P]] dims = [0] : tensor<16x256xf64> -> tensor<256xf64>
// CHECK: %[[S:.*]] = omni.cast %[[T]] : tensor<256xf64> -> tensor<256xf32>
// CHECK: return %[[S]]
func.func @bias_grad(%g: tensor<2048x256xf32>) -> tensor<256xf32> {
  %s = omni.reduce sum %g dims = [0] : tensor<2048x256xf32> -> tensor<256xf32>
  return %s : tensor<256xf32>
}

// -----

// Tests that an RMS norm's weight gradient over [batch, heads, tokens,
// head_dim] keeps the batch of 8 as its groups (no reshape) and sums the
// heads and tokens per group.
// CHECK-LABEL: func.func @norm_weight_grad
// CHECK-NOT: omni.reshape
// CHECK: %[[W:.*]] = omni.cast %{{.*}} : tensor<8x8x256x32xf32> -> tensor<8x8x256x32xf64>
// CHECK: %[[P:.*]] = omni.reduce sum %[[W]] dims = [1, 2] : tensor<8x8x256x32xf64> -> tensor<8x32xf64>
// CHECK: %[[T:.*]] = omni.reduce sum %[[P]] dims = [0] : tensor<8x32xf64> -> tensor<32xf64>
// CHECK: omni.cast %[[T]] : tensor<32xf64> -> tensor<32xf32>
func.func @norm_weight_grad(%x: tensor<8x8x256x32xf32>) -> tensor<32xf32> {
  %s = omni.reduce sum %x dims = [0, 1, 2] : tensor<8x8x256x32xf32> -> tensor<32xf32>
  return %s : tensor<32xf32>
}

// -----

// Tests that a leading unit dimension the sum keeps is part of the rows
// and comes back with a reshape of the result.
// CHECK-LABEL: func.func @kept_unit
// CHECK: omni.reshape %{{.*}} : tensor<1x2048x128xf32> -> tensor<16x128x128xf32>
// CHECK: omni.reduce sum %{{.*}} dims = [1] : tensor<16x128x128xf64> -> tensor<16x128xf64>
// CHECK: omni.reduce sum %{{.*}} dims = [0] : tensor<16x128xf64> -> tensor<128xf64>
// CHECK: omni.cast %{{.*}} : tensor<128xf64> -> tensor<128xf32>
// CHECK: omni.reshape %{{.*}} : tensor<128xf32> -> tensor<1x128xf32>
func.func @kept_unit(%x: tensor<1x2048x128xf32>) -> tensor<1x128xf32> {
  %s = omni.reduce sum %x dims = [1] : tensor<1x2048x128xf32> -> tensor<1x128xf32>
  return %s : tensor<1x128xf32>
}

// -----

// Tests that an f64 sum needs no cast: both stages sum f64 values.
// CHECK-LABEL: func.func @f64_sum
// CHECK-NOT: omni.cast
// CHECK: omni.reduce sum %{{.*}} dims = [1] : tensor<16x128x256xf64> -> tensor<16x256xf64>
// CHECK: omni.reduce sum %{{.*}} dims = [0] : tensor<16x256xf64> -> tensor<256xf64>
// CHECK-NOT: omni.cast
func.func @f64_sum(%g: tensor<2048x256xf64>) -> tensor<256xf64> {
  %s = omni.reduce sum %g dims = [0] : tensor<2048x256xf64> -> tensor<256xf64>
  return %s : tensor<256xf64>
}

// -----

// Tests the sums that stay as they are: below 2^17 elements, over the last
// dimension only (the rows are kept), to a scalar, a max, a mean, an
// integer sum, and rows (a prime number) that no group size divides.
// CHECK-LABEL: func.func @unchanged
// CHECK-NOT: omni.cast
// CHECK-NOT: omni.reshape
// CHECK-COUNT-7: omni.reduce
// CHECK-NOT: omni.reduce
func.func @unchanged(%a: tensor<256x256xf32>, %b: tensor<2048x256xf32>,
                     %c: tensor<2053x64xf32>, %d: tensor<2048x256xi32>)
    -> (tensor<256xf32>, tensor<2048xf32>, tensor<f32>, tensor<256xf32>,
        tensor<256xf32>, tensor<64xf32>, tensor<256xi32>) {
  %0 = omni.reduce sum %a dims = [0] : tensor<256x256xf32> -> tensor<256xf32>
  %1 = omni.reduce sum %b dims = [1] : tensor<2048x256xf32> -> tensor<2048xf32>
  %2 = omni.reduce sum %b dims = [0, 1] : tensor<2048x256xf32> -> tensor<f32>
  %3 = omni.reduce max %b dims = [0] : tensor<2048x256xf32> -> tensor<256xf32>
  %4 = omni.reduce mean %b dims = [0] : tensor<2048x256xf32> -> tensor<256xf32>
  %5 = omni.reduce sum %c dims = [0] : tensor<2053x64xf32> -> tensor<64xf32>
  %6 = omni.reduce sum %d dims = [0] : tensor<2048x256xi32> -> tensor<256xi32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<256xf32>, tensor<2048xf32>, tensor<f32>, tensor<256xf32>, tensor<256xf32>, tensor<64xf32>, tensor<256xi32>
}
