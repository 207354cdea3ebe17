// RUN: omni-opt %s -omni-decompose -split-input-file | FileCheck %s
// RUN: omni-opt %s -omni-decompose=decompose-library-ops -split-input-file | FileCheck %s --check-prefix=LIB
// RUN: omni-opt %s -omni-decompose=decompose-attention-grad -split-input-file | FileCheck %s --check-prefix=GRAD

// Tests that silu becomes x * logistic(x).
// CHECK-LABEL: func.func @silu
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK: %[[S:.*]] = omni.logistic %[[X]]
// CHECK: %[[Y:.*]] = omni.mul %[[X]], %[[S]]
// CHECK: return %[[Y]]
func.func @silu(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = omni.silu %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that softmax subtracts the row max, exponentiates and divides by the
// row sum, broadcasting back along the reduced dimension.
// CHECK-LABEL: func.func @softmax
// CHECK: %[[M:.*]] = omni.reduce max %{{.*}} dims = [1] : tensor<2x8xf32> -> tensor<2xf32>
// CHECK: omni.broadcast_in_dim %[[M]], dims = [0] : tensor<2xf32> -> tensor<2x8xf32>
// CHECK: omni.exp
// CHECK: omni.reduce sum %{{.*}} dims = [1]
// CHECK: omni.div
// CHECK-NOT: omni.softmax
func.func @softmax(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %y = omni.softmax %x, dim = 1 : tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Tests that layer_norm centers, scales by rsqrt(var + eps) and applies the
// affine parameters along the last dimension.
// CHECK-LABEL: func.func @layer_norm
// CHECK: omni.reduce mean %{{.*}} dims = [1]
// CHECK: omni.sub
// CHECK: omni.reduce mean %{{.*}} dims = [1]
// CHECK: omni.rsqrt
// CHECK: omni.broadcast_in_dim %{{.*}}, dims = [1] : tensor<8xf32> -> tensor<2x8xf32>
// CHECK: omni.mul
// CHECK: omni.broadcast_in_dim %{{.*}}, dims = [1] : tensor<8xf32> -> tensor<2x8xf32>
// CHECK: omni.add
// CHECK-NOT: omni.layer_norm
func.func @layer_norm(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x8xf32> {
  %y = omni.layer_norm %x weight %w bias %b : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Tests that linear becomes a matmul with the transposed weight plus bias,
// and that the library ops (matmul, attention) are kept by default.
// CHECK-LABEL: func.func @linear_keeps_library_ops
// CHECK: omni.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<2x8xf32>, tensor<4x8xf32> -> tensor<2x4xf32>
// CHECK: omni.add
// CHECK: omni.attention
// LIB-LABEL: func.func @linear_keeps_library_ops
// LIB-NOT: omni.attention
// LIB: omni.exp
func.func @linear_keeps_library_ops(%x: tensor<2x8xf32>, %w: tensor<4x8xf32>, %b: tensor<4xf32>, %q: tensor<1x2x4x8xf32>) -> (tensor<2x4xf32>, tensor<1x2x4x8xf32>) {
  %y = omni.linear %x, %w bias %b : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %o = omni.attention %q, %q, %q : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %y, %o : tensor<2x4xf32>, tensor<1x2x4x8xf32>
}

// -----

// Tests that attention_grad is kept by default (the cpu library call) and
// becomes the five matmuls and the softmax of its definition for targets
// without it (decompose-attention-grad, and decompose-library-ops).
// CHECK-LABEL: func.func @attention_grad
// CHECK: omni.attention_grad
// GRAD-LABEL: func.func @attention_grad
// GRAD-NOT: omni.attention_grad
// GRAD: omni.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32> -> tensor<1x2x4x6xf32>
// GRAD: omni.exp
// GRAD: omni.matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<1x2x4x6xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x6x8xf32>
// GRAD: omni.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32> -> tensor<1x2x4x6xf32>
// GRAD: omni.reduce sum
// GRAD: omni.matmul %{{.*}}, %{{.*}} : tensor<1x2x4x6xf32>, tensor<1x2x6x8xf32> -> tensor<1x2x4x8xf32>
// GRAD: omni.matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<1x2x4x6xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x6x8xf32>
// LIB-LABEL: func.func @attention_grad
// LIB-NOT: omni.attention_grad
func.func @attention_grad(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %o: tensor<1x2x4x8xf32>, %do: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) {
  %dq, %dk, %dv = omni.attention_grad %q, %k, %k, %o, %do : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>)
  return %dq, %dk, %dv : tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>
}

// -----

// Tests that a bf16 attention_grad is decomposed in f32: the operands
// widened, the three cotangents rounded once at the end.
// GRAD-LABEL: func.func @attention_grad_bf16
// GRAD-COUNT-4: omni.cast %{{.*}} : tensor<{{.*}}xbf16> -> tensor<{{.*}}xf32>
// GRAD: omni.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32> -> tensor<1x2x4x6xf32>
// GRAD-COUNT-3: omni.cast %{{.*}} : tensor<{{.*}}xf32> -> tensor<{{.*}}xbf16>
// GRAD-NOT: omni.attention_grad
func.func @attention_grad_bf16(%q: tensor<1x2x4x8xbf16>, %k: tensor<1x2x6x8xbf16>, %o: tensor<1x2x4x8xbf16>, %do: tensor<1x2x4x8xbf16>) -> (tensor<1x2x4x8xbf16>, tensor<1x2x6x8xbf16>, tensor<1x2x6x8xbf16>) {
  %dq, %dk, %dv = omni.attention_grad %q, %k, %k, %o, %do : (tensor<1x2x4x8xbf16>, tensor<1x2x6x8xbf16>, tensor<1x2x6x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>) -> (tensor<1x2x4x8xbf16>, tensor<1x2x6x8xbf16>, tensor<1x2x6x8xbf16>)
  return %dq, %dk, %dv : tensor<1x2x4x8xbf16>, tensor<1x2x6x8xbf16>, tensor<1x2x6x8xbf16>
}

// -----

// Tests that a masked attention_grad adds the mask, broadcast over heads,
// to the scores before the softmax.
// GRAD-LABEL: func.func @attention_grad_mask
// GRAD: omni.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<2x2x4x8xf32>, tensor<2x2x6x8xf32> -> tensor<2x2x4x6xf32>
// GRAD: omni.broadcast_in_dim %{{.*}}, dims = [0, 2, 3] : tensor<2x4x6xf32> -> tensor<2x2x4x6xf32>
// GRAD: omni.add
// GRAD: omni.exp
// GRAD-NOT: omni.attention_grad
func.func @attention_grad_mask(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x6x8xf32>, %o: tensor<2x2x4x8xf32>, %do: tensor<2x2x4x8xf32>, %m: tensor<2x1x4x6xf32>) -> (tensor<2x2x4x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>) {
  %dq, %dk, %dv = omni.attention_grad %q, %k, %k, %o, %do mask %m : (tensor<2x2x4x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x1x4x6xf32>) -> (tensor<2x2x4x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>)
  return %dq, %dk, %dv : tensor<2x2x4x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>
}

// -----

// Tests that cfg_combine slices the [uncond; cond] halves.
// CHECK-LABEL: func.func @cfg
// CHECK-DAG: omni.slice %{{.*}} [0:2:1, 0:3:1] : tensor<4x3xf32> -> tensor<2x3xf32>
// CHECK-DAG: omni.slice %{{.*}} [2:4:1, 0:3:1] : tensor<4x3xf32> -> tensor<2x3xf32>
func.func @cfg(%v: tensor<4x3xf32>) -> tensor<2x3xf32> {
  %y = omni.cfg_combine %v {guidance_scale = 4.5} : tensor<4x3xf32> -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// Tests that a runtime guidance scale (an f64 operand) is rounded once to
// the element type and scales cond - uncond.
// CHECK-LABEL: func.func @cfg_operand
// CHECK-DAG: %[[D:.*]] = omni.sub
// CHECK-DAG: %[[G:.*]] = omni.cast %arg1 : tensor<f64> -> tensor<f32>
// CHECK: %[[GB:.*]] = omni.broadcast_in_dim %[[G]], dims = [] : tensor<f32> -> tensor<2x3xf32>
// CHECK: omni.mul %[[D]], %[[GB]]
// CHECK-NOT: omni.cfg_combine
func.func @cfg_operand(%v: tensor<4x3xf32>, %g: tensor<f64>) -> tensor<2x3xf32> {
  %y = omni.cfg_combine %v guidance_scale(%g) {guidance_scale = 4.5} : tensor<4x3xf32> -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// Tests that a runtime noise level scales std_dev (cast once from f64) and
// that such a step keeps its density (no Euler shortcut).
// CHECK-LABEL: func.func @sde_operand
// CHECK: %[[A:.*]] = omni.cast %arg3 : tensor<f64> -> tensor<f32>
// CHECK: omni.mul %{{.*}}, %[[A]] : tensor<f32>
// CHECK: omni.log
// CHECK-NOT: omni.sde_step
func.func @sde_operand(%x: tensor<2x4xf32>, %v: tensor<2x4xf32>, %s: tensor<11xf32>, %a: tensor<f64>, %i: index) -> tensor<2xf32> {
  %xn, %lp, %mu, %std = omni.sde_step sde %x, %v, %s[%i] next %x noise_level(%a) {noise_level = 0.0} : tensor<2x4xf32>, tensor<11xf32>
  return %lp : tensor<2xf32>
}

// -----

// Tests that grpo_loss's runtime clip range gives its bounds 1 + c and
// 1 - c in f64, each rounded once, and that the runtime beta weighs kl.
// CHECK-LABEL: func.func @grpo_operands
// CHECK-DAG: %[[ONE:.*]] = omni.constant dense<1.000000e+00> : tensor<f64>
// CHECK-DAG: omni.add %arg6, %[[ONE]] : tensor<f64>
// CHECK-DAG: omni.sub %[[ONE]], %arg6 : tensor<f64>
// CHECK-DAG: omni.neg %arg7 : tensor<f64>
// CHECK-DAG: omni.cast %arg8 : tensor<f64> -> tensor<f32>
// CHECK-NOT: omni.grpo_loss
func.func @grpo_operands(%lp: tensor<4xf32>, %old: tensor<4xf32>, %a: tensor<4xf32>, %mu: tensor<4x3xf32>, %ref: tensor<4x3xf32>, %std: tensor<f32>, %c: tensor<f64>, %m: tensor<f64>, %b: tensor<f64>) -> tensor<f32> {
  %l, %k, %cf, %kl = omni.grpo_loss %lp, %old, %a kl(%mu, %ref, %std) clip_range(%c) adv_clip_max(%m) beta(%b) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>, tensor<f64>, tensor<f64>, tensor<f64>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  return %l : tensor<f32>
}

// -----

// Tests that sde_step reads the sigmas at the step index and the next one,
// and that an Euler step (ode) has an all-zero log_prob.
// CHECK-LABEL: func.func @sde_and_ode
// CHECK-DAG: %[[Z:.*]] = omni.constant dense<0.000000e+00> : tensor<2xf32>
// CHECK: %[[N:.*]] = arith.addi %{{.*}}, %{{.*}} : index
// CHECK-DAG: tensor.extract %{{.*}}[%[[N]]] : tensor<11xf32>
// CHECK-DAG: omni.sqrt
// CHECK-DAG: omni.log
// CHECK: omni.reduce mean %{{.*}} dims = [1] : tensor<2x4xf32> -> tensor<2xf32>
// CHECK-NOT: omni.sde_step
// CHECK: return %{{.*}}, %[[Z]]
func.func @sde_and_ode(%x: tensor<2x4xf32>, %v: tensor<2x4xf32>, %e: tensor<2x4xf32>, %s: tensor<11xf32>, %i: index) -> (tensor<2xf32>, tensor<2xf32>) {
  %xn, %lp, %mu, %std = omni.sde_step sde %x, %v, %s[%i] noise %e : tensor<2x4xf32>, tensor<11xf32>
  %xo, %lpo, %muo, %stdo = omni.sde_step ode %x, %v, %s[%i] noise %e : tensor<2x4xf32>, tensor<11xf32>
  return %lp, %lpo : tensor<2xf32>, tensor<2xf32>
}

// -----

// Tests that every diffusion RL op is rewritten into primitives.
// CHECK-LABEL: func.func @rl_ops
// CHECK-NOT: omni.flow_schedule
// CHECK-NOT: omni.group_advantages
// CHECK-NOT: omni.grpo_loss
// CHECK-NOT: omni.clip_grad_norm
// CHECK-NOT: omni.adamw
// CHECK: return
func.func @rl_ops(%r: tensor<4xf32>, %lp: tensor<4xf32>, %old: tensor<4xf32>, %p: tensor<8xf32>, %g: tensor<8xf32>, %m: tensor<8xf32>, %t: tensor<i64>) -> (tensor<11xf32>, tensor<f32>, tensor<8xf32>) {
  %s, %ts = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
  %a = omni.group_advantages %r {group_size = 2} : tensor<4xf32>
  %l, %k, %c, %kl = omni.grpo_loss %lp, %old, %a : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  %cg, %n = omni.clip_grad_norm %g : tensor<8xf32>
  %p2, %m2, %v2 = omni.adamw %p, %cg, %m, %m, %t {lr = 1.0e-3} : tensor<8xf32>
  return %s, %l, %p2 : tensor<11xf32>, tensor<f32>, tensor<8xf32>
}
