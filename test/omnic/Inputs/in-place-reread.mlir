// A kernel whose bf16 result %r the memory plan writes over its input %m
// (the projection; its last reader), while %p, computed from %m, is read
// again after %r: the cuda lowering must not recompute %p from %m in that
// later reader (compiler/codegen/cuda/CudaLinalgFusion.cpp, fuseProducer),
// which would then read %r (measured: 0.999 relative error when it did).
// Run by cuda-emulate.test through emulated-ops.sh; not in
// tools/gpu-check/ops.mlir, whose f32 tolerance a GPU's bf16 matmuls
// would not meet.
func.func @in_place_reread(%x: tensor<67x129xf32>, %w: tensor<129x129xf32>, %b: tensor<129xf32>) -> (tensor<67x129xf32>, tensor<67x129xf32>) {
  %xb = omni.cast %x : tensor<67x129xf32> -> tensor<67x129xbf16>
  %wb = omni.cast %w : tensor<129x129xf32> -> tensor<129x129xbf16>
  %m = omni.matmul %xb, %wb : tensor<67x129xbf16>, tensor<129x129xbf16> -> tensor<67x129xbf16>
  %mf = omni.cast %m : tensor<67x129xbf16> -> tensor<67x129xf32>
  %bb = omni.broadcast_in_dim %b, dims = [1] : tensor<129xf32> -> tensor<67x129xf32>
  %p = omni.add %mf, %bb : tensor<67x129xf32>
  %e = omni.tanh %p : tensor<67x129xf32>
  %r = omni.cast %e : tensor<67x129xf32> -> tensor<67x129xbf16>
  %q = omni.mul %p, %p : tensor<67x129xf32>
  %n = omni.matmul %r, %wb : tensor<67x129xbf16>, tensor<129x129xbf16> -> tensor<67x129xbf16>
  %nf = omni.cast %n : tensor<67x129xbf16> -> tensor<67x129xf32>
  return %nf, %q : tensor<67x129xf32>, tensor<67x129xf32>
}
