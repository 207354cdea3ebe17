// Round trip of every omni op through the custom and the generic form.
// RUN: omni-opt %s | omni-opt | FileCheck %s
// RUN: omni-opt %s --mlir-print-op-generic | omni-opt | FileCheck %s
// RUN: omni-opt %s --mlir-print-op-generic | omni-opt --mlir-print-op-generic | omni-opt | FileCheck %s

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>, %p: tensor<2x3xi1>, %q: tensor<2x3xi1>) -> tensor<2x3xf32> {
  // CHECK: omni.neg %{{.*}} : tensor<2x3xf32>
  %0 = omni.neg %x : tensor<2x3xf32>
  // CHECK: omni.abs
  %1 = omni.abs %0 : tensor<2x3xf32>
  // CHECK: omni.sign
  %2 = omni.sign %1 : tensor<2x3xf32>
  // CHECK: omni.exp
  %3 = omni.exp %2 : tensor<2x3xf32>
  // CHECK: omni.log
  %4 = omni.log %3 : tensor<2x3xf32>
  // CHECK: omni.sqrt
  %5 = omni.sqrt %4 : tensor<2x3xf32>
  // CHECK: omni.rsqrt
  %6 = omni.rsqrt %5 : tensor<2x3xf32>
  // CHECK: omni.tanh
  %7 = omni.tanh %6 : tensor<2x3xf32>
  // CHECK: omni.sin
  %8 = omni.sin %7 : tensor<2x3xf32>
  // CHECK: omni.cos
  %9 = omni.cos %8 : tensor<2x3xf32>
  // CHECK: omni.erf
  %10 = omni.erf %9 : tensor<2x3xf32>
  // CHECK: omni.logistic
  %11 = omni.logistic %10 : tensor<2x3xf32>
  // CHECK: omni.floor
  %12 = omni.floor %11 : tensor<2x3xf32>
  // CHECK: omni.is_finite %{{.*}} : tensor<2x3xf32>
  %13 = omni.is_finite %12 : tensor<2x3xf32>
  // CHECK: omni.add %{{.*}}, %{{.*}} : tensor<2x3xf32>
  %14 = omni.add %12, %y : tensor<2x3xf32>
  // CHECK: omni.sub
  %15 = omni.sub %14, %y : tensor<2x3xf32>
  // CHECK: omni.mul
  %16 = omni.mul %15, %y : tensor<2x3xf32>
  // CHECK: omni.div
  %17 = omni.div %16, %y : tensor<2x3xf32>
  // CHECK: omni.max
  %18 = omni.max %17, %y : tensor<2x3xf32>
  // CHECK: omni.min
  %19 = omni.min %18, %y : tensor<2x3xf32>
  // CHECK: omni.pow
  %20 = omni.pow %19, %y : tensor<2x3xf32>
  // CHECK: omni.and %{{.*}}, %{{.*}} : tensor<2x3xi1>
  %21 = omni.and %p, %13 : tensor<2x3xi1>
  // CHECK: omni.or
  %22 = omni.or %21, %q : tensor<2x3xi1>
  // CHECK: omni.compare lt, %{{.*}}, %{{.*}} : tensor<2x3xf32>
  %23 = omni.compare lt, %20, %y : tensor<2x3xf32>
  %24 = omni.and %22, %23 : tensor<2x3xi1>
  // CHECK: omni.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x3xi1>, tensor<2x3xf32>
  %25 = omni.select %24, %20, %x : tensor<2x3xi1>, tensor<2x3xf32>
  // CHECK: omni.cast %{{.*}} : tensor<2x3xf32> -> tensor<2x3xbf16>
  %26 = omni.cast %25 : tensor<2x3xf32> -> tensor<2x3xbf16>
  // CHECK: omni.cast %{{.*}} : tensor<2x3xbf16> -> tensor<2x3xf32>
  %27 = omni.cast %26 : tensor<2x3xbf16> -> tensor<2x3xf32>
  return %27 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<2x3xf32>, %v: tensor<3xf32>) -> (tensor<4x4xf32>, tensor<2xf32>, tensor<4x2xi64>) {
  // CHECK: omni.broadcast_in_dim %{{.*}}, dims = [1] : tensor<3xf32> -> tensor<2x3xf32>
  %b = omni.broadcast_in_dim %v, dims = [1] : tensor<3xf32> -> tensor<2x3xf32>
  // CHECK: omni.reshape %{{.*}} : tensor<2x3xf32> -> tensor<3x2xf32>
  %r = omni.reshape %b : tensor<2x3xf32> -> tensor<3x2xf32>
  // CHECK: omni.transpose %{{.*}}, permutation = [1, 0] : tensor<3x2xf32> -> tensor<2x3xf32>
  %t = omni.transpose %r, permutation = [1, 0] : tensor<3x2xf32> -> tensor<2x3xf32>
  // CHECK: omni.slice %{{.*}} [0:2:1, 1:3:1] : tensor<2x3xf32> -> tensor<2x2xf32>
  %s = omni.slice %t [0:2:1, 1:3:1] : tensor<2x3xf32> -> tensor<2x2xf32>
  // CHECK: omni.concat %{{.*}}, %{{.*}} dim = 0 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<4x2xf32>
  %c = omni.concat %s, %s dim = 0 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<4x2xf32>
  // CHECK: omni.pad %{{.*}} low = [0, 1] high = [0, 1] value = 5.000000e-01 : tensor<4x2xf32> -> tensor<4x4xf32>
  %p = omni.pad %c low = [0, 1] high = [0, 1] value = 0.5 : tensor<4x2xf32> -> tensor<4x4xf32>
  // CHECK: omni.reduce mean %{{.*}} dims = [1] : tensor<2x3xf32> -> tensor<2xf32>
  %m = omni.reduce mean %x dims = [1] : tensor<2x3xf32> -> tensor<2xf32>
  // CHECK: omni.iota dim = 0 : tensor<4x2xi64>
  %i = omni.iota dim = 0 : tensor<4x2xi64>
  // CHECK: omni.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
  %k = omni.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %mk = omni.add %m, %k : tensor<2xf32>
  return %p, %mk, %i : tensor<4x4xf32>, tensor<2xf32>, tensor<4x2xi64>
}

// CHECK-LABEL: func.func @contractions_and_random
func.func @contractions_and_random(%a: tensor<5x2x3xf32>, %b: tensor<4x3xf32>, %img: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>, %key: tensor<i64>, %ctr: tensor<i64>, %off: tensor<i64>) -> (tensor<5x2x4xf32>, tensor<1x8x4x4xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  // CHECK: omni.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<5x2x3xf32>, tensor<4x3xf32> -> tensor<5x2x4xf32>
  %m = omni.matmul %a, %b transpose_rhs : tensor<5x2x3xf32>, tensor<4x3xf32> -> tensor<5x2x4xf32>
  // CHECK: omni.conv2d %{{.*}}, %{{.*}} {padding = array<i64: 1, 1>, strides = array<i64: 2, 2>} : tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32> -> tensor<1x8x4x4xf32>
  %c = omni.conv2d %img, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32> -> tensor<1x8x4x4xf32>
  // CHECK: omni.random_normal %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x16xf32>
  %n = omni.random_normal %key, %ctr, %off : tensor<4x16xf32>
  // CHECK: omni.random_uniform %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x16xf32>
  %u = omni.random_uniform %key, %ctr, %off : tensor<4x16xf32>
  return %m, %c, %n, %u : tensor<5x2x4xf32>, tensor<1x8x4x4xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// CHECK-LABEL: func.func @composites
func.func @composites(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %lw: tensor<4x8xf32>, %lb: tensor<4xf32>, %la: tensor<2x8xf32>, %lbb: tensor<4x2xf32>, %q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %mask: tensor<1x1x4x6xf32>) -> (tensor<2x8xf32>, tensor<2x4xf32>, tensor<1x2x4x8xf32>) {
  // CHECK: omni.softmax %{{.*}}, dim = 1 : tensor<2x8xf32>
  %0 = omni.softmax %x, dim = 1 : tensor<2x8xf32>
  // CHECK: omni.layer_norm %{{.*}} weight %{{.*}} bias %{{.*}} {eps = 9.9999999999999995E-7 : f64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %1 = omni.layer_norm %0 weight %w bias %w {eps = 1.0e-6} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  // CHECK: omni.layer_norm %{{.*}} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %2 = omni.layer_norm %1 : (tensor<2x8xf32>) -> tensor<2x8xf32>
  // CHECK: omni.rms_norm %{{.*}} weight %{{.*}} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %3 = omni.rms_norm %2 weight %w : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  // CHECK: omni.gelu tanh %{{.*}} : tensor<2x8xf32>
  %4 = omni.gelu tanh %3 : tensor<2x8xf32>
  // CHECK: omni.gelu erf %{{.*}} : tensor<2x8xf32>
  %5 = omni.gelu erf %4 : tensor<2x8xf32>
  // CHECK: omni.silu %{{.*}} : tensor<2x8xf32>
  %6 = omni.silu %5 : tensor<2x8xf32>
  // CHECK: omni.linear %{{.*}}, %{{.*}} bias %{{.*}} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %7 = omni.linear %6, %lw bias %lb : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // CHECK: omni.lora_linear %{{.*}}, %{{.*}} lora(%{{.*}}, %{{.*}}) {scale = 2.000000e+00 : f64} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<2x8xf32>, tensor<4x2xf32>) -> tensor<2x4xf32>
  %8 = omni.lora_linear %6, %lw lora(%la, %lbb) {scale = 2.0} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<2x8xf32>, tensor<4x2xf32>) -> tensor<2x4xf32>
  %9 = omni.add %7, %8 : tensor<2x4xf32>
  // CHECK: omni.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {scale = 1.250000e-01 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x1x4x6xf32>) -> tensor<1x2x4x8xf32>
  %10 = omni.attention %q, %k, %k mask %mask {scale = 0.125} : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x1x4x6xf32>) -> tensor<1x2x4x8xf32>
  // CHECK: omni.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>)
  %g:3 = omni.attention_grad %q, %k, %k, %10, %10 {scale = 0.125} : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>)
  // CHECK: omni.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>)
  %gm:3 = omni.attention_grad %q, %k, %k, %10, %10 mask %mask : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>)
  return %6, %9, %10 : tensor<2x8xf32>, tensor<2x4xf32>, tensor<1x2x4x8xf32>
}

// CHECK-LABEL: func.func @diffusion_rl
func.func @diffusion_rl(%x: tensor<4x16xf32>, %vv: tensor<8x16xf32>, %e: tensor<4x16xf32>, %old: tensor<4xf32>, %r: tensor<4xf32>, %ref: tensor<4x16xf32>, %dt: tensor<f32>, %p: tensor<16xf32>, %g: tensor<16xf32>, %m: tensor<16xf32>, %t: tensor<i64>, %hp: tensor<f64>) -> (tensor<f32>, tensor<f32>, tensor<16xf32>, tensor<f32>) {
  %i = arith.constant 3 : index
  // CHECK: omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
  %sigmas, %timesteps = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
  // CHECK: omni.flow_schedule dynamic_shift steps = 4 {image_seq_len = 1024 : i64, shift_terminal = 2.000000e-02 : f64} : tensor<5xf32>, tensor<4xf32>
  %ds, %dts = omni.flow_schedule dynamic_shift steps = 4 {image_seq_len = 1024 : i64, shift_terminal = 0.02} : tensor<5xf32>, tensor<4xf32>
  // CHECK: omni.cfg_combine %{{.*}} {guidance_scale = 4.500000e+00 : f64} : tensor<8x16xf32> -> tensor<4x16xf32>
  %v = omni.cfg_combine %vv {guidance_scale = 4.5} : tensor<8x16xf32> -> tensor<4x16xf32>
  // CHECK: omni.sde_step sde %{{.*}}, %{{.*}}, %{{.*}}[%{{.*}}] noise %{{.*}} : tensor<4x16xf32>, tensor<11xf32>
  %xn, %lp, %mu, %std = omni.sde_step sde %x, %v, %sigmas[%i] noise %e : tensor<4x16xf32>, tensor<11xf32>
  // CHECK: omni.sde_step cps %{{.*}}, %{{.*}}, %{{.*}}[%{{.*}}] next %{{.*}} {noise_level = 8.000000e-01 : f64} : tensor<4x16xf32>, tensor<11xf32>
  %xn2, %lp2, %mu2, %std2 = omni.sde_step cps %x, %v, %sigmas[%i] next %xn {noise_level = 0.8} : tensor<4x16xf32>, tensor<11xf32>
  // CHECK: omni.sde_step ode
  %xn3, %lp3, %mu3, %std3 = omni.sde_step ode %x, %v, %sigmas[%i] noise %e : tensor<4x16xf32>, tensor<11xf32>
  // CHECK: omni.group_advantages %{{.*}} {ddof = 1 : i64, global_std = false, group_size = 2 : i64} : tensor<4xf32>
  %adv = omni.group_advantages %r {group_size = 2, global_std = false, ddof = 1} : tensor<4xf32>
  // CHECK: omni.grpo_loss %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  %l0, %a0, %c0, %k0 = omni.grpo_loss %lp, %old, %adv : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  // CHECK: omni.grpo_loss %{{.*}}, %{{.*}}, %{{.*}} kl(%{{.*}}, %{{.*}}, %{{.*}}) dt(%{{.*}}) {beta = 4.000000e-02 : f64, kl_form = #omni.kl_form<exact>}
  %l1, %a1, %c1, %k1 = omni.grpo_loss %lp2, %old, %adv kl(%mu2, %ref, %std2) dt(%dt) {beta = 0.04, kl_form = #omni.kl_form<exact>} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  // Runtime hyper-parameters as f64 operands.
  // CHECK: omni.cfg_combine %{{.*}} guidance_scale(%{{.*}}) {guidance_scale = 4.500000e+00 : f64} : tensor<8x16xf32> -> tensor<4x16xf32>
  %vh = omni.cfg_combine %vv guidance_scale(%hp) {guidance_scale = 4.5} : tensor<8x16xf32> -> tensor<4x16xf32>
  // CHECK: omni.sde_step sde %{{.*}}, %{{.*}}, %{{.*}}[%{{.*}}] next %{{.*}} noise_level(%{{.*}}) : tensor<4x16xf32>, tensor<11xf32>
  %xn4, %lp4, %mu4, %std4 = omni.sde_step sde %x, %vh, %sigmas[%i] next %xn noise_level(%hp) : tensor<4x16xf32>, tensor<11xf32>
  // CHECK: omni.grpo_loss %{{.*}}, %{{.*}}, %{{.*}} kl(%{{.*}}, %{{.*}}, %{{.*}}) clip_range(%{{.*}}) adv_clip_max(%{{.*}}) beta(%{{.*}}) {beta = 4.000000e-02 : f64}
  %l2, %a2, %c2, %k2 = omni.grpo_loss %lp4, %old, %adv kl(%mu4, %ref, %std4) clip_range(%hp) adv_clip_max(%hp) beta(%hp) {beta = 0.04} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<f64>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  // CHECK: omni.clip_grad_norm %{{.*}}, %{{.*}} {max_norm = 5.000000e-01 : f64} : tensor<16xf32>, tensor<16xf32>
  %cg:2, %norm = omni.clip_grad_norm %g, %m {max_norm = 0.5} : tensor<16xf32>, tensor<16xf32>
  // CHECK: omni.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {lr = 1.000000e-03 : f64} : tensor<16xf32>
  %p2, %m2, %v2 = omni.adamw %p, %cg#0, %m, %cg#1, %t {lr = 1.0e-3} : tensor<16xf32>
  return %l0, %l1, %p2, %norm : tensor<f32>, tensor<f32>, tensor<16xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @loss
func.func @loss(%w: tensor<4xf32>, %x: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>) {
  %y = omni.mul %w, %x : tensor<4xf32>
  %s = omni.reduce sum %y dims = [0] : tensor<4xf32> -> tensor<f32>
  return %s, %y : tensor<f32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @structure
func.func @structure(%w: tensor<4xf32>, %x: tensor<4xf32>, %img: tensor<2x3x4x4xf32>) -> (tensor<4xf32>, tensor<f32>, tensor<2xf32>) {
  // CHECK: omni.grad @loss(%{{.*}}, %{{.*}}) wrt = [0, 1] : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  %gw, %gx = omni.grad @loss(%w, %x) wrt = [0, 1] : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  // CHECK: omni.value_and_grad @loss(%{{.*}}, %{{.*}}) wrt = [0] : (tensor<4xf32>, tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>, tensor<4xf32>)
  %l, %aux, %g = omni.value_and_grad @loss(%w, %x) wrt = [0] : (tensor<4xf32>, tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>, tensor<4xf32>)
  // CHECK: omni.fusion(%{{.*}}, %{{.*}}) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: ^bb0(%{{.*}}: tensor<4xf32>, %{{.*}}: tensor<4xf32>):
  // CHECK: omni.yield %{{.*}} : tensor<4xf32>
  %f = omni.fusion (%gw, %g) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    %s = omni.add %a, %b : tensor<4xf32>
    %t = omni.mul %s, %a : tensor<4xf32>
    omni.yield %t : tensor<4xf32>
  }
  // CHECK: omni.host_call "jpeg_compressibility"(%{{.*}}) : (tensor<2x3x4x4xf32>) -> tensor<2xf32>
  %r = omni.host_call "jpeg_compressibility"(%img) : (tensor<2x3x4x4xf32>) -> tensor<2xf32>
  return %f, %l, %r : tensor<4xf32>, tensor<f32>, tensor<2xf32>
}

// CHECK: omni.mesh @mesh axes = ["dp", "tp"] shape = [4, 2]
omni.mesh @mesh axes = ["dp", "tp"] shape = [4, 2]

// CHECK-LABEL: func.func @sharding
func.func @sharding(%x: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<32x4xf32>, tensor<1x4xf32>, tensor<8x4xf32>) {
  // CHECK: omni.shard %{{.*}} : tensor<8x4xf32> to #omni.sharding<@mesh, {{\[}}["dp"], ["tp"]]>
  %s = omni.shard %x : tensor<8x4xf32> to #omni.sharding<@mesh, [["dp"], ["tp"]]>
  // CHECK: omni.all_reduce sum %{{.*}} over @mesh ["dp"] : tensor<8x4xf32>
  %r = omni.all_reduce sum %s over @mesh ["dp"] : tensor<8x4xf32>
  // CHECK: omni.all_gather %{{.*}} over @mesh ["dp"] dim = 0 : tensor<8x4xf32> -> tensor<32x4xf32>
  %g = omni.all_gather %r over @mesh ["dp"] dim = 0 : tensor<8x4xf32> -> tensor<32x4xf32>
  // CHECK: omni.reduce_scatter max %{{.*}} over @mesh ["dp", "tp"] dim = 0 : tensor<8x4xf32> -> tensor<1x4xf32>
  %rs = omni.reduce_scatter max %r over @mesh ["dp", "tp"] dim = 0 : tensor<8x4xf32> -> tensor<1x4xf32>
  // CHECK: omni.broadcast %{{.*}} over @mesh ["tp"] root = 1 : tensor<8x4xf32>
  %b = omni.broadcast %r over @mesh ["tp"] root = 1 : tensor<8x4xf32>
  return %s, %g, %rs, %b : tensor<8x4xf32>, tensor<32x4xf32>, tensor<1x4xf32>, tensor<8x4xf32>
}
