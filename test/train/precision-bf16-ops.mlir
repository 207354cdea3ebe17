// bf16 ops (docs/precision.md section 2) compiled by omnic and run by
// omnirun print exactly what the reference evaluator prints, and the values
// are the math's: the casts round to nearest even, the bf16 matmul, conv2d
// and attention accumulate in f32 and round their result once.
// RUN: omnic %s -o %t.bin
// RUN: omnirun %t.bin --function=f --input=2x3xf32=1.00390625,1.01171875,3,-2,0.5,1.5 --input=3x2xf32=1,2,0,1,-1,3 --input=1x1x3x3xf32=1,2,3,4,5,6,7,8,9 --input=1x1x2x2xf32=1,0,0,-1 --input=1x1x2x2xf32=0,0,0,0 --input=1x1x4x2xf32=1,2,3,4,5,6,7,8 --input=1x1x4x2xf32=1,2,2,4,3,6,6,0 > %t.run
// RUN: omni-eval %s --function=f --input=2x3xf32=1.00390625,1.01171875,3,-2,0.5,1.5 --input=3x2xf32=1,2,0,1,-1,3 --input=1x1x3x3xf32=1,2,3,4,5,6,7,8,9 --input=1x1x2x2xf32=1,0,0,-1 --input=1x1x2x2xf32=0,0,0,0 --input=1x1x4x2xf32=1,2,3,4,5,6,7,8 --input=1x1x4x2xf32=1,2,2,4,3,6,6,0 > %t.eval
// RUN: diff %t.run %t.eval
// RUN: FileCheck %s < %t.run

// Ties: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 and goes to the even
// 1; 1 + 3*2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6 and goes to the
// even 1 + 2^-6 = 1.015625.
// CHECK: result[0]: tensor<2x3xf32>={{\[\[}}1 1.015625 3][-2 0.5 1.5]]
// The rounded a times b: row 0 is [1 + 0 - 3, 2 + 1.015625 + 9] =
// [-2, 12.015625]; bf16 values near 12 are 0.0625 apart, so 12.015625
// rounds to 12.
// CHECK: result[1]: tensor<2x2xf32>={{\[\[}}-2 12][-3.5 1]]
// conv2d with the filter [[1, 0], [0, -1]]: x[i][j] - x[i+1][j+1] = -4.
// CHECK: result[2]: tensor<1x1x2x2xf32>={{\[\[\[\[}}-4 -4][-4 -4]]]]
// attention with q = 0: uniform weights 1/4, the mean of v's rows [3, 3].
// CHECK: result[3]: tensor<1x1x2x2xf32>={{\[\[\[\[}}3 3][3 3]]]]

func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>, %x: tensor<1x1x3x3xf32>, %w: tensor<1x1x2x2xf32>, %q: tensor<1x1x2x2xf32>, %k: tensor<1x1x4x2xf32>, %v: tensor<1x1x4x2xf32>) -> (tensor<2x3xf32>, tensor<2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) {
  %a16 = omni.cast %a : tensor<2x3xf32> -> tensor<2x3xbf16>
  %b16 = omni.cast %b : tensor<3x2xf32> -> tensor<3x2xbf16>
  %ar = omni.cast %a16 : tensor<2x3xbf16> -> tensor<2x3xf32>
  %m16 = omni.matmul %a16, %b16 : tensor<2x3xbf16>, tensor<3x2xbf16> -> tensor<2x2xbf16>
  %m = omni.cast %m16 : tensor<2x2xbf16> -> tensor<2x2xf32>
  %x16 = omni.cast %x : tensor<1x1x3x3xf32> -> tensor<1x1x3x3xbf16>
  %w16 = omni.cast %w : tensor<1x1x2x2xf32> -> tensor<1x1x2x2xbf16>
  %c16 = omni.conv2d %x16, %w16 : tensor<1x1x3x3xbf16>, tensor<1x1x2x2xbf16> -> tensor<1x1x2x2xbf16>
  %c = omni.cast %c16 : tensor<1x1x2x2xbf16> -> tensor<1x1x2x2xf32>
  %q16 = omni.cast %q : tensor<1x1x2x2xf32> -> tensor<1x1x2x2xbf16>
  %k16 = omni.cast %k : tensor<1x1x4x2xf32> -> tensor<1x1x4x2xbf16>
  %v16 = omni.cast %v : tensor<1x1x4x2xf32> -> tensor<1x1x4x2xbf16>
  %o16 = omni.attention %q16, %k16, %v16 : (tensor<1x1x2x2xbf16>, tensor<1x1x4x2xbf16>, tensor<1x1x4x2xbf16>) -> tensor<1x1x2x2xbf16>
  %o = omni.cast %o16 : tensor<1x1x2x2xbf16> -> tensor<1x1x2x2xf32>
  return %ar, %m, %c, %o : tensor<2x3xf32>, tensor<2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>
}
