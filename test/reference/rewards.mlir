// RUN: omni-eval %s --function=jpeg --input=i64=3 | FileCheck %s

// The JPEG rewards through omni.host_call (docs/flowgrpo-math.md section 4). Byte
// counts depend on the libjpeg-turbo build, so this checks the formulas
// exactly instead: compressibility = -bytes / 500000 and incompressibility
// = bytes / 1000 describe the same whole number of bytes.

// Tests that -500000 * compressibility and 1000 * incompressibility round
// to the same positive byte count for each of two random 3x32x32 images
// (values outside [0, 1] are clamped by the reward).
// CHECK: result[0]: tensor<2xi1>=[1 1]
// CHECK: result[1]: tensor<2xi1>=[1 1]
func.func @jpeg(%seed: tensor<i64>) -> (tensor<2xi1>, tensor<2xi1>) {
  %zero = omni.constant dense<0> : tensor<i64>
  %img = omni.random_uniform %seed, %zero, %zero : tensor<2x3x32x32xf32>
  %c = omni.host_call "jpeg_compressibility"(%img) : (tensor<2x3x32x32xf32>) -> tensor<2xf32>
  %i = omni.host_call "jpeg_incompressibility"(%img) : (tensor<2x3x32x32xf32>) -> tensor<2xf32>
  %k1 = omni.constant dense<-500000.0> : tensor<2xf32>
  %k2 = omni.constant dense<1000.0> : tensor<2xf32>
  %half = omni.constant dense<0.5> : tensor<2xf32>
  %b1 = omni.mul %c, %k1 : tensor<2xf32>
  %b2 = omni.mul %i, %k2 : tensor<2xf32>
  %r1a = omni.add %b1, %half : tensor<2xf32>
  %r1 = omni.floor %r1a : tensor<2xf32>
  %r2a = omni.add %b2, %half : tensor<2xf32>
  %r2 = omni.floor %r2a : tensor<2xf32>
  %same = omni.compare eq, %r1, %r2 : tensor<2xf32>
  %zerof = omni.constant dense<0.0> : tensor<2xf32>
  %positive = omni.compare gt, %r1, %zerof : tensor<2xf32>
  return %same, %positive : tensor<2xi1>, tensor<2xi1>
}
