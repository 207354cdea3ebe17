// The per-op differential programs of tools/gpu-check (README.md): one
// small function per op kind the FlowGRPO recipes use, compiled with
// `omnic --target=cpu` and `--target=cuda` from this one file; prepare.sh
// runs every function on the cpu driver (the expected outputs) and run.sh
// on the GPU, and compare.py checks f32 within 1e-5 relative (per tensor:
// max |a - b| / max |a|). Inputs come from gen_inputs.py (deterministic,
// from the argument types). Shapes are odd on purpose (tails of tiles and
// blocks) and large enough to span several thread blocks.

// Elementwise arithmetic and math functions, fused as the recipes fuse
// them (one kernel of several ops).
func.func @elementwise(%x: tensor<67x129xf32>, %y: tensor<67x129xf32>) -> (tensor<67x129xf32>, tensor<67x129xf32>, tensor<67x129xf32>) {
  %a = omni.add %x, %y : tensor<67x129xf32>
  %s = omni.sub %x, %y : tensor<67x129xf32>
  %m = omni.mul %a, %s : tensor<67x129xf32>
  %two = omni.constant dense<2.5> : tensor<67x129xf32>
  %d = omni.div %m, %two : tensor<67x129xf32>
  %n = omni.neg %d : tensor<67x129xf32>
  %ab = omni.abs %n : tensor<67x129xf32>
  %mx = omni.max %x, %y : tensor<67x129xf32>
  %mn = omni.min %x, %y : tensor<67x129xf32>
  %sg = omni.sign %s : tensor<67x129xf32>
  %r = omni.mul %mx, %sg : tensor<67x129xf32>
  return %ab, %r, %mn : tensor<67x129xf32>, tensor<67x129xf32>, tensor<67x129xf32>
}

func.func @math(%x: tensor<67x129xf32>, %p: tensor<67x129xf32>) -> (tensor<67x129xf32>, tensor<67x129xf32>, tensor<67x129xf32>, tensor<67x129xf32>, tensor<67x129xf32>, tensor<67x129xf32>) {
  %e = omni.exp %x : tensor<67x129xf32>
  %l = omni.log %p : tensor<67x129xf32>
  %t = omni.tanh %x : tensor<67x129xf32>
  %sq = omni.sqrt %p : tensor<67x129xf32>
  %rs = omni.rsqrt %p : tensor<67x129xf32>
  %sn = omni.sin %x : tensor<67x129xf32>
  %cs = omni.cos %x : tensor<67x129xf32>
  %er = omni.erf %x : tensor<67x129xf32>
  %lg = omni.logistic %x : tensor<67x129xf32>
  %pw = omni.pow %p, %x : tensor<67x129xf32>
  %fl = omni.floor %x : tensor<67x129xf32>
  %a = omni.add %sq, %rs : tensor<67x129xf32>
  %b = omni.add %sn, %cs : tensor<67x129xf32>
  %c = omni.add %er, %fl : tensor<67x129xf32>
  return %e, %l, %t, %a, %b, %c : tensor<67x129xf32>, tensor<67x129xf32>, tensor<67x129xf32>, tensor<67x129xf32>, tensor<67x129xf32>, tensor<67x129xf32>
}

func.func @activations(%x: tensor<67x129xf32>) -> (tensor<67x129xf32>, tensor<67x129xf32>, tensor<67x129xf32>) {
  %g = omni.gelu tanh %x : tensor<67x129xf32>
  %gs = omni.gelu erf %x : tensor<67x129xf32>
  %s = omni.silu %x : tensor<67x129xf32>
  return %g, %gs, %s : tensor<67x129xf32>, tensor<67x129xf32>, tensor<67x129xf32>
}

func.func @compare_select(%x: tensor<67x129xf32>, %y: tensor<67x129xf32>) -> (tensor<67x129xf32>, tensor<67x129xf32>) {
  %p = omni.compare lt, %x, %y : tensor<67x129xf32>
  %r = omni.select %p, %x, %y : tensor<67x129xi1>, tensor<67x129xf32>
  %f = omni.is_finite %x : tensor<67x129xf32>
  %z = omni.constant dense<0.0> : tensor<67x129xf32>
  %q = omni.select %f, %y, %z : tensor<67x129xi1>, tensor<67x129xf32>
  return %r, %q : tensor<67x129xf32>, tensor<67x129xf32>
}

// f32 -> bf16 rounds to nearest even on both drivers (the bf16 recipes
// round every matmul operand so); it comes back widened to f32, exact,
// since .npy has no bf16.
func.func @cast(%x: tensor<67x129xf32>) -> (tensor<67x129xf16>, tensor<67x129xf64>, tensor<67x129xf32>, tensor<67x129xf32>) {
  %h = omni.cast %x : tensor<67x129xf32> -> tensor<67x129xf16>
  %d = omni.cast %x : tensor<67x129xf32> -> tensor<67x129xf64>
  %back = omni.cast %h : tensor<67x129xf16> -> tensor<67x129xf32>
  %b = omni.cast %x : tensor<67x129xf32> -> tensor<67x129xbf16>
  %bback = omni.cast %b : tensor<67x129xbf16> -> tensor<67x129xf32>
  return %h, %d, %back, %bback : tensor<67x129xf16>, tensor<67x129xf64>, tensor<67x129xf32>, tensor<67x129xf32>
}

// Reductions: rows, columns, all, every kind.
func.func @reductions(%x: tensor<67x1029xf32>) -> (tensor<67xf32>, tensor<1029xf32>, tensor<f32>, tensor<67xf32>, tensor<1029xf32>, tensor<67xf32>) {
  %rs = omni.reduce sum %x dims = [1] : tensor<67x1029xf32> -> tensor<67xf32>
  %cs = omni.reduce sum %x dims = [0] : tensor<67x1029xf32> -> tensor<1029xf32>
  %all = omni.reduce sum %x dims = [0, 1] : tensor<67x1029xf32> -> tensor<f32>
  %mx = omni.reduce max %x dims = [1] : tensor<67x1029xf32> -> tensor<67xf32>
  %mn = omni.reduce min %x dims = [0] : tensor<67x1029xf32> -> tensor<1029xf32>
  %me = omni.reduce mean %x dims = [1] : tensor<67x1029xf32> -> tensor<67xf32>
  return %rs, %cs, %all, %mx, %mn, %me : tensor<67xf32>, tensor<1029xf32>, tensor<f32>, tensor<67xf32>, tensor<1029xf32>, tensor<67xf32>
}

func.func @big_sum(%x: tensor<1048583xf32>) -> tensor<f32> {
  %s = omni.reduce sum %x dims = [0] : tensor<1048583xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// A large elementwise kernel (2^20 elements or more, a multiple of 4):
// each thread runs 4 elements, N / 4 apart (docs/backend-cuda.md, "Launch
// configuration"). Small inputs broadcast, and a bool result (1 byte per
// element), keep the bundle small; the sums are exact IEEE on both sides.
func.func @big_elementwise(%x: tensor<1024xf32>, %y: tensor<1028xf32>) -> tensor<1024x1028xi1> {
  %bx = omni.broadcast_in_dim %x, dims = [0] : tensor<1024xf32> -> tensor<1024x1028xf32>
  %by = omni.broadcast_in_dim %y, dims = [1] : tensor<1028xf32> -> tensor<1024x1028xf32>
  %s = omni.add %bx, %by : tensor<1024x1028xf32>
  %z = omni.constant dense<0.0> : tensor<1024x1028xf32>
  %p = omni.compare lt, %s, %z : tensor<1024x1028xf32>
  return %p : tensor<1024x1028xi1>
}

// Layout: broadcasts, transposes, slices, concatenation, pads, reshapes.
func.func @layout(%x: tensor<5x37x19xf32>, %v: tensor<19xf32>) -> (tensor<19x5x37xf32>, tensor<5x37x19xf32>, tensor<2x13x19xf32>, tensor<5x74x19xf32>, tensor<5x39x21xf32>, tensor<185x19xf32>) {
  %t = omni.transpose %x, permutation = [2, 0, 1] : tensor<5x37x19xf32> -> tensor<19x5x37xf32>
  %b = omni.broadcast_in_dim %v, dims = [2] : tensor<19xf32> -> tensor<5x37x19xf32>
  %bx = omni.add %x, %b : tensor<5x37x19xf32>
  %s = omni.slice %x [1:5:2, 3:29:2, 0:19:1] : tensor<5x37x19xf32> -> tensor<2x13x19xf32>
  %c = omni.concat %x, %bx dim = 1 : (tensor<5x37x19xf32>, tensor<5x37x19xf32>) -> tensor<5x74x19xf32>
  %p = omni.pad %x low = [0, 1, 1] high = [0, 1, 1] value = 0.5 : tensor<5x37x19xf32> -> tensor<5x39x21xf32>
  %r = omni.reshape %x : tensor<5x37x19xf32> -> tensor<185x19xf32>
  return %t, %bx, %s, %c, %p, %r : tensor<19x5x37xf32>, tensor<5x37x19xf32>, tensor<2x13x19xf32>, tensor<5x74x19xf32>, tensor<5x39x21xf32>, tensor<185x19xf32>
}

// Library calls: matmul (plain, transposed, batched), linear with bias.
func.func @matmul(%a: tensor<130x67xf32>, %b: tensor<67x259xf32>, %bt: tensor<259x67xf32>) -> (tensor<130x259xf32>, tensor<130x259xf32>) {
  %c = omni.matmul %a, %b : tensor<130x67xf32>, tensor<67x259xf32> -> tensor<130x259xf32>
  %d = omni.matmul %a, %bt transpose_rhs : tensor<130x67xf32>, tensor<259x67xf32> -> tensor<130x259xf32>
  return %c, %d : tensor<130x259xf32>, tensor<130x259xf32>
}

func.func @linear(%x: tensor<2x65x96xf32>, %w: tensor<160x96xf32>, %b: tensor<160xf32>) -> tensor<2x65x160xf32> {
  %y = omni.linear %x, %w bias %b : (tensor<2x65x96xf32>, tensor<160x96xf32>, tensor<160xf32>) -> tensor<2x65x160xf32>
  return %y : tensor<2x65x160xf32>
}

// Attention as the joint blocks call it, and with an additive mask.
func.func @attention(%q: tensor<2x3x77x64xf32>, %k: tensor<2x3x77x64xf32>, %v: tensor<2x3x77x64xf32>, %m: tensor<1x1x77x77xf32>) -> (tensor<2x3x77x64xf32>, tensor<2x3x77x64xf32>) {
  %o = omni.attention %q, %k, %v : (tensor<2x3x77x64xf32>, tensor<2x3x77x64xf32>, tensor<2x3x77x64xf32>) -> tensor<2x3x77x64xf32>
  %om = omni.attention %q, %k, %v mask %m : (tensor<2x3x77x64xf32>, tensor<2x3x77x64xf32>, tensor<2x3x77x64xf32>, tensor<1x1x77x77xf32>) -> tensor<2x3x77x64xf32>
  return %o, %om : tensor<2x3x77x64xf32>, tensor<2x3x77x64xf32>
}

// The VAE's convolutions: 3x3 padded, 1x1.
func.func @conv2d(%x: tensor<2x8x19x23xf32>, %w: tensor<16x8x3x3xf32>, %w1: tensor<4x8x1x1xf32>) -> (tensor<2x16x19x23xf32>, tensor<2x4x19x23xf32>) {
  %y = omni.conv2d %x, %w {padding = array<i64: 1, 1>} : tensor<2x8x19x23xf32>, tensor<16x8x3x3xf32> -> tensor<2x16x19x23xf32>
  %z = omni.conv2d %x, %w1 : tensor<2x8x19x23xf32>, tensor<4x8x1x1xf32> -> tensor<2x4x19x23xf32>
  return %y, %z : tensor<2x16x19x23xf32>, tensor<2x4x19x23xf32>
}

// The library calls in bf16, as --opt=precision=bf16 runs them
// (docs/precision.md): bf16 operands, f32 accumulation, the result
// rounded once to bf16 and widened back here (exactly) for the .npy.
// gen_inputs.py gives each its tolerance, from that math.
func.func @matmul_bf16(%a: tensor<130x67xf32>, %b: tensor<67x259xf32>) -> tensor<130x259xf32> {
  %ab = omni.cast %a : tensor<130x67xf32> -> tensor<130x67xbf16>
  %bb = omni.cast %b : tensor<67x259xf32> -> tensor<67x259xbf16>
  %c = omni.matmul %ab, %bb : tensor<130x67xbf16>, tensor<67x259xbf16> -> tensor<130x259xbf16>
  %r = omni.cast %c : tensor<130x259xbf16> -> tensor<130x259xf32>
  return %r : tensor<130x259xf32>
}

func.func @linear_bf16(%x: tensor<2x65x96xf32>, %w: tensor<160x96xf32>, %b: tensor<160xf32>) -> tensor<2x65x160xf32> {
  %xb = omni.cast %x : tensor<2x65x96xf32> -> tensor<2x65x96xbf16>
  %wb = omni.cast %w : tensor<160x96xf32> -> tensor<160x96xbf16>
  %bb = omni.cast %b : tensor<160xf32> -> tensor<160xbf16>
  %y = omni.linear %xb, %wb bias %bb : (tensor<2x65x96xbf16>, tensor<160x96xbf16>, tensor<160xbf16>) -> tensor<2x65x160xbf16>
  %r = omni.cast %y : tensor<2x65x160xbf16> -> tensor<2x65x160xf32>
  return %r : tensor<2x65x160xf32>
}

func.func @attention_bf16(%q: tensor<2x3x77x64xf32>, %k: tensor<2x3x77x64xf32>, %v: tensor<2x3x77x64xf32>) -> tensor<2x3x77x64xf32> {
  %qb = omni.cast %q : tensor<2x3x77x64xf32> -> tensor<2x3x77x64xbf16>
  %kb = omni.cast %k : tensor<2x3x77x64xf32> -> tensor<2x3x77x64xbf16>
  %vb = omni.cast %v : tensor<2x3x77x64xf32> -> tensor<2x3x77x64xbf16>
  %o = omni.attention %qb, %kb, %vb : (tensor<2x3x77x64xbf16>, tensor<2x3x77x64xbf16>, tensor<2x3x77x64xbf16>) -> tensor<2x3x77x64xbf16>
  %r = omni.cast %o : tensor<2x3x77x64xbf16> -> tensor<2x3x77x64xf32>
  return %r : tensor<2x3x77x64xf32>
}

func.func @conv2d_bf16(%x: tensor<2x8x19x23xf32>, %w: tensor<16x8x3x3xf32>) -> tensor<2x16x19x23xf32> {
  %xb = omni.cast %x : tensor<2x8x19x23xf32> -> tensor<2x8x19x23xbf16>
  %wb = omni.cast %w : tensor<16x8x3x3xf32> -> tensor<16x8x3x3xbf16>
  %y = omni.conv2d %xb, %wb {padding = array<i64: 1, 1>} : tensor<2x8x19x23xbf16>, tensor<16x8x3x3xbf16> -> tensor<2x16x19x23xbf16>
  %r = omni.cast %y : tensor<2x16x19x23xbf16> -> tensor<2x16x19x23xf32>
  return %r : tensor<2x16x19x23xf32>
}

// Normalizations and softmax.
func.func @norms(%x: tensor<67x257xf32>, %w: tensor<257xf32>, %b: tensor<257xf32>) -> (tensor<67x257xf32>, tensor<67x257xf32>, tensor<67x257xf32>, tensor<67x257xf32>) {
  %ln = omni.layer_norm %x weight %w bias %b {eps = 1.0e-06} : (tensor<67x257xf32>, tensor<257xf32>, tensor<257xf32>) -> tensor<67x257xf32>
  %ln0 = omni.layer_norm %x : (tensor<67x257xf32>) -> tensor<67x257xf32>
  %rn = omni.rms_norm %x weight %w {eps = 1.0e-06} : (tensor<67x257xf32>, tensor<257xf32>) -> tensor<67x257xf32>
  %sm = omni.softmax %x, dim = 1 : tensor<67x257xf32>
  return %ln, %ln0, %rn, %sm : tensor<67x257xf32>, tensor<67x257xf32>, tensor<67x257xf32>, tensor<67x257xf32>
}

// Random numbers (bit-identical to the cpu driver, docs/rng.md).
func.func @random(%key: tensor<i64>, %counter: tensor<i64>) -> (tensor<3x1001xf32>, tensor<3x1001xf32>) {
  %off = omni.constant dense<5> : tensor<i64>
  %n = omni.random_normal %key, %counter, %off : tensor<3x1001xf32>
  %u = omni.random_uniform %key, %counter, %off : tensor<3x1001xf32>
  return %n, %u : tensor<3x1001xf32>, tensor<3x1001xf32>
}

// The SDE step of the rollout (docs/flowgrpo-math.md), with given noise.
func.func @sde_step(%x: tensor<4x4096xf32>, %v: tensor<4x4096xf32>, %e: tensor<4x4096xf32>) -> (tensor<4x4096xf32>, tensor<4xf32>, tensor<4x4096xf32>) {
  %i = arith.constant 3 : index
  %sigmas = omni.constant dense<[1.0, 0.95, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.0]> : tensor<11xf32>
  %xn, %lp, %mu, %std = omni.sde_step sde %x, %v, %sigmas[%i] noise %e {noise_level = 0.7} : tensor<4x4096xf32>, tensor<11xf32>
  return %xn, %lp, %mu : tensor<4x4096xf32>, tensor<4xf32>, tensor<4x4096xf32>
}
