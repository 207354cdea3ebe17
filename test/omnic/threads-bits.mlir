// Tests that kernels split over their rows (docs/backend.md, "Kernel ABI")
// give the same bits for any thread count: a layer norm over rows, a
// softmax behind a leading unit dimension and a transpose that keeps the
// rows, on Philox normals (no matmul: OpenBLAS's results may depend on its
// thread count), run with 1, 2 and 3 threads and compared byte for byte.
// The JSON shows that those kernels run on more than one work item.
// RUN: omnic %s -o %t.bin
// RUN: omnic %s --emit=json | FileCheck %s
// RUN: omnirun %t.bin --function=f --input=i64=5 --threads=1 --output=@%t.1a.npy --output=@%t.1b.npy --output=@%t.1c.npy
// RUN: omnirun %t.bin --function=f --input=i64=5 --threads=2 --output=@%t.2a.npy --output=@%t.2b.npy --output=@%t.2c.npy
// RUN: omnirun %t.bin --function=f --input=i64=5 --threads=3 --output=@%t.3a.npy --output=@%t.3b.npy --output=@%t.3c.npy
// RUN: cmp %t.1a.npy %t.2a.npy
// RUN: cmp %t.1b.npy %t.2b.npy
// RUN: cmp %t.1c.npy %t.2c.npy
// RUN: cmp %t.1a.npy %t.3a.npy
// RUN: cmp %t.1b.npy %t.3b.npy
// RUN: cmp %t.1c.npy %t.3c.npy

func.func @f(%seed: tensor<i64>) -> (tensor<64x512xf32>, tensor<1x32x16x64xf32>, tensor<16x32x64xf32>) {
  %zero = omni.constant dense<0> : tensor<i64>
  %one = omni.constant dense<1> : tensor<i64>
  %two = omni.constant dense<2> : tensor<i64>
  %x = omni.random_normal %seed, %zero, %zero : tensor<64x512xf32>
  %m = omni.reduce mean %x dims = [1] : tensor<64x512xf32> -> tensor<64xf32>
  %mb = omni.broadcast_in_dim %m, dims = [0] : tensor<64xf32> -> tensor<64x512xf32>
  %c = omni.sub %x, %mb : tensor<64x512xf32>
  %sq = omni.mul %c, %c : tensor<64x512xf32>
  %v = omni.reduce mean %sq dims = [1] : tensor<64x512xf32> -> tensor<64xf32>
  %eps = omni.constant dense<1.0e-5> : tensor<64xf32>
  %ve = omni.add %v, %eps : tensor<64xf32>
  %rs = omni.rsqrt %ve : tensor<64xf32>
  %rb = omni.broadcast_in_dim %rs, dims = [0] : tensor<64xf32> -> tensor<64x512xf32>
  %ln = omni.mul %c, %rb : tensor<64x512xf32>
  %s = omni.random_normal %seed, %one, %zero : tensor<1x32x16x64xf32>
  %mx = omni.reduce max %s dims = [3] : tensor<1x32x16x64xf32> -> tensor<1x32x16xf32>
  %mxb = omni.broadcast_in_dim %mx, dims = [0, 1, 2] : tensor<1x32x16xf32> -> tensor<1x32x16x64xf32>
  %d = omni.sub %s, %mxb : tensor<1x32x16x64xf32>
  %e = omni.exp %d : tensor<1x32x16x64xf32>
  %se = omni.reduce sum %e dims = [3] : tensor<1x32x16x64xf32> -> tensor<1x32x16xf32>
  %seb = omni.broadcast_in_dim %se, dims = [0, 1, 2] : tensor<1x32x16xf32> -> tensor<1x32x16x64xf32>
  %sm = omni.div %e, %seb : tensor<1x32x16x64xf32>
  %t = omni.random_normal %seed, %two, %zero : tensor<16x64x32xf32>
  %tt = omni.tanh %t : tensor<16x64x32xf32>
  %tr = omni.transpose %tt, permutation = [0, 2, 1] : tensor<16x64x32xf32> -> tensor<16x32x64xf32>
  return %ln, %sm, %tr : tensor<64x512xf32>, tensor<1x32x16x64xf32>, tensor<16x32x64xf32>
}
// CHECK: "grid": {{[2-9]|[1-9][0-9]+}},
