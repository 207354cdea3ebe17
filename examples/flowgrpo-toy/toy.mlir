// A complete FlowGRPO iteration on a toy problem, written by hand in the
// omni dialect (docs/flowgrpo-math.md sections 1-6).
//
// - policy: a two-layer MLP velocity model v(x, t) on flattened 3x8x8
//   latents (192 features), time fed as t/1000;
// - rollout: 2 prompts x group 4 = 8 samples, N = 4 SDE steps (a = 0.7) as
//   an scf.for, noise from the counter-based RNG (counter = 16*iteration +
//   step + 1; the initial noise uses 16*iteration);
// - reward: the final latent squashed to [0, 1] by a logistic and scored by
//   the host function jpeg_compressibility;
// - advantages per group of 4 with the global std;
// - loss: every step but the last is trained (window W = 0), with the
//   rollout's log-probs as old log-probs, averaged over the trained steps.
//
// Entry points: @rollout, @loss (the function omni.grad differentiates) and
// @iteration (rollout, advantages and loss together, with metrics).

!x = tensor<8x192xf32>

func.func private @velocity(%w1: tensor<32x193xf32>, %b1: tensor<32xf32>,
                    %w2: tensor<192x32xf32>, %b2: tensor<192xf32>,
                    %x: !x, %t: tensor<f32>) -> !x {
  %tcol = omni.broadcast_in_dim %t, dims = [] : tensor<f32> -> tensor<8x1xf32>
  %inv = omni.constant dense<1.0e-3> : tensor<8x1xf32>
  %ts = omni.mul %tcol, %inv : tensor<8x1xf32>
  %in = omni.concat %x, %ts dim = 1 : (!x, tensor<8x1xf32>) -> tensor<8x193xf32>
  %h = omni.linear %in, %w1 bias %b1 : (tensor<8x193xf32>, tensor<32x193xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %a = omni.silu %h : tensor<8x32xf32>
  %v = omni.linear %a, %w2 bias %b2 : (tensor<8x32xf32>, tensor<192x32xf32>, tensor<192xf32>) -> !x
  return %v : !x
}

/// The timestep of step %i as a 0-D tensor.
func.func private @timestep(%timesteps: tensor<4xf32>, %i: index) -> tensor<f32> {
  %t = tensor.extract %timesteps[%i] : tensor<4xf32>
  %tt = tensor.from_elements %t : tensor<f32>
  return %tt : tensor<f32>
}

/// Samples the batch: returns the final latents, the latent before every
/// step (xs[i] = x_i), the rollout log-probs of every step and the rewards.
func.func @rollout(%w1: tensor<32x193xf32>, %b1: tensor<32xf32>,
                   %w2: tensor<192x32xf32>, %b2: tensor<192xf32>,
                   %seed: tensor<i64>, %iteration: tensor<i64>)
    -> (!x, tensor<4x8x192xf32>, tensor<4x8xf32>, tensor<8xf32>) {
  %sigmas, %timesteps = omni.flow_schedule static_shift steps = 4 : tensor<5xf32>, tensor<4xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %offset = omni.constant dense<0> : tensor<i64>
  %sixteen = omni.constant dense<16> : tensor<i64>
  %base = omni.mul %iteration, %sixteen : tensor<i64>
  %x0 = omni.random_normal %seed, %base, %offset : !x
  %xs0 = omni.constant dense<0.0> : tensor<4x8x192xf32>
  %lps0 = omni.constant dense<0.0> : tensor<4x8xf32>
  %final:3 = scf.for %i = %c0 to %c4 step %c1
      iter_args(%x = %x0, %xs = %xs0, %lps = %lps0)
      -> (!x, tensor<4x8x192xf32>, tensor<4x8xf32>) {
    %t = func.call @timestep(%timesteps, %i) : (tensor<4xf32>, index) -> tensor<f32>
    %v = func.call @velocity(%w1, %b1, %w2, %b2, %x, %t) : (tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>, !x, tensor<f32>) -> !x
    %ip1 = arith.addi %i, %c1 : index
    %ii = arith.index_cast %ip1 : index to i64
    %it = tensor.from_elements %ii : tensor<i64>
    %counter = omni.add %base, %it : tensor<i64>
    %e = omni.random_normal %seed, %counter, %offset : !x
    %xn, %lp, %mu, %std = omni.sde_step sde %x, %v, %sigmas[%i] noise %e : !x, tensor<5xf32>
    %xs2 = tensor.insert_slice %x into %xs[%i, 0, 0] [1, 8, 192] [1, 1, 1] : !x into tensor<4x8x192xf32>
    %lps2 = tensor.insert_slice %lp into %lps[%i, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
    scf.yield %xn, %xs2, %lps2 : !x, tensor<4x8x192xf32>, tensor<4x8xf32>
  }
  %squash = omni.logistic %final#0 : !x
  %img = omni.reshape %squash : !x -> tensor<8x3x8x8xf32>
  %rewards = omni.host_call "jpeg_compressibility"(%img) : (tensor<8x3x8x8xf32>) -> tensor<8xf32>
  return %final#0, %final#1, %final#2, %rewards : !x, tensor<4x8x192xf32>, tensor<4x8xf32>, tensor<8xf32>
}

/// The FlowGRPO loss of the trained steps 0..2, with its metrics: loss,
/// approx_kl and clipfrac averaged over the steps.
func.func @loss(%w1: tensor<32x193xf32>, %b1: tensor<32xf32>,
                %w2: tensor<192x32xf32>, %b2: tensor<192xf32>,
                %xs: tensor<4x8x192xf32>, %old_lps: tensor<4x8xf32>, %adv: tensor<8xf32>)
    -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %sigmas, %timesteps = omni.flow_schedule static_shift steps = 4 : tensor<5xf32>, tensor<4xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %zero = omni.constant dense<0.0> : tensor<f32>
  %third = omni.constant dense<0.333333343> : tensor<f32>
  %acc:3 = scf.for %k = %c0 to %c3 step %c1
      iter_args(%l = %zero, %akl = %zero, %cf = %zero)
      -> (tensor<f32>, tensor<f32>, tensor<f32>) {
    %x = tensor.extract_slice %xs[%k, 0, 0] [1, 8, 192] [1, 1, 1] : tensor<4x8x192xf32> to !x
    %kp1 = arith.addi %k, %c1 : index
    %xnext = tensor.extract_slice %xs[%kp1, 0, 0] [1, 8, 192] [1, 1, 1] : tensor<4x8x192xf32> to !x
    %old = tensor.extract_slice %old_lps[%k, 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<8xf32>
    %t = func.call @timestep(%timesteps, %k) : (tensor<4xf32>, index) -> tensor<f32>
    %v = func.call @velocity(%w1, %b1, %w2, %b2, %x, %t) : (tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>, !x, tensor<f32>) -> !x
    %xn, %lp, %mu, %std = omni.sde_step sde %x, %v, %sigmas[%k] next %xnext : !x, tensor<5xf32>
    %lk, %aklk, %cfk, %klk = omni.grpo_loss %lp, %old, %adv : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
    %l2 = omni.add %l, %lk : tensor<f32>
    %akl2 = omni.add %akl, %aklk : tensor<f32>
    %cf2 = omni.add %cf, %cfk : tensor<f32>
    scf.yield %l2, %akl2, %cf2 : tensor<f32>, tensor<f32>, tensor<f32>
  }
  %loss = omni.mul %acc#0, %third : tensor<f32>
  %approx_kl = omni.mul %acc#1, %third : tensor<f32>
  %clipfrac = omni.mul %acc#2, %third : tensor<f32>
  return %loss, %approx_kl, %clipfrac : tensor<f32>, tensor<f32>, tensor<f32>
}

/// One iteration without the update: rollout, group advantages, loss.
/// Returns loss, approx_kl, clipfrac, reward mean, advantages and rewards.
func.func @iteration(%w1: tensor<32x193xf32>, %b1: tensor<32xf32>,
                     %w2: tensor<192x32xf32>, %b2: tensor<192xf32>,
                     %seed: tensor<i64>, %iteration: tensor<i64>)
    -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<8xf32>, tensor<8xf32>) {
  %final, %xs, %lps, %rewards = func.call @rollout(%w1, %b1, %w2, %b2, %seed, %iteration) : (tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>, tensor<i64>, tensor<i64>) -> (!x, tensor<4x8x192xf32>, tensor<4x8xf32>, tensor<8xf32>)
  %adv = omni.group_advantages %rewards {group_size = 4} : tensor<8xf32>
  %loss, %akl, %cf = func.call @loss(%w1, %b1, %w2, %b2, %xs, %lps, %adv) : (tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>, tensor<4x8x192xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>)
  %rmean = omni.reduce mean %rewards dims = [0] : tensor<8xf32> -> tensor<f32>
  return %loss, %akl, %cf, %rmean, %adv, %rewards : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<8xf32>, tensor<8xf32>
}

/// Initial parameters drawn from the counter RNG (key %seed, counters
/// 1000..1003), scaled like PyTorch's default Linear init: U(-1/sqrt(fan_in),
/// 1/sqrt(fan_in)) for the first layer; the last layer is scaled small so the
/// initial velocity is near zero.
func.func @init(%seed: tensor<i64>)
    -> (tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>) {
  %zero = omni.constant dense<0> : tensor<i64>
  %c0 = omni.constant dense<1000> : tensor<i64>
  %c1 = omni.constant dense<1001> : tensor<i64>
  %c2 = omni.constant dense<1002> : tensor<i64>
  %u1 = omni.random_uniform %seed, %c0, %zero : tensor<32x193xf32>
  %half1 = omni.constant dense<0.5> : tensor<32x193xf32>
  %s1 = omni.constant dense<0.143963724> : tensor<32x193xf32>
  %c1x = omni.sub %u1, %half1 : tensor<32x193xf32>
  %w1s = omni.mul %c1x, %s1 : tensor<32x193xf32>
  %two1 = omni.constant dense<2.0> : tensor<32x193xf32>
  %w1 = omni.mul %w1s, %two1 : tensor<32x193xf32>
  %b1 = omni.constant dense<0.0> : tensor<32xf32>
  %n2 = omni.random_normal %seed, %c1, %zero : tensor<192x32xf32>
  %s2 = omni.constant dense<0.01> : tensor<192x32xf32>
  %w2 = omni.mul %n2, %s2 : tensor<192x32xf32>
  %b2 = omni.constant dense<0.0> : tensor<192xf32>
  return %w1, %b1, %w2, %b2 : tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>
}

/// The demo entry: initial parameters from %seed, then one iteration.
func.func @main(%seed: tensor<i64>, %iteration: tensor<i64>)
    -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<8xf32>, tensor<8xf32>) {
  %w1, %b1, %w2, %b2 = func.call @init(%seed) : (tensor<i64>) -> (tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>)
  %r:6 = func.call @iteration(%w1, %b1, %w2, %b2, %seed, %iteration) : (tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>, tensor<i64>, tensor<i64>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<8xf32>, tensor<8xf32>)
  return %r#0, %r#1, %r#2, %r#3, %r#4, %r#5 : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<8xf32>, tensor<8xf32>
}

/// One training iteration (the entry point of `omnirun --train`: its
/// leading arguments are the state it returns updated, then seed and
/// iteration; the remaining results are named metrics): rollout,
/// advantages, the loss's gradient with
/// respect to the four parameters (omni-autodiff expands value_and_grad),
/// global grad-norm clipping at 1.0 and AdamW (lr 1e-3) on each parameter.
/// %t is the optimizer step count before this update.
/// Returns the new parameters, moments and step, then loss, reward mean and
/// the gradient norm.
func.func @train_step(%w1: tensor<32x193xf32> {omni.name = "mlp.0.weight"},
                      %b1: tensor<32xf32> {omni.name = "mlp.0.bias"},
                      %w2: tensor<192x32xf32> {omni.name = "mlp.2.weight"},
                      %b2: tensor<192xf32> {omni.name = "mlp.2.bias"},
                      %mw1: tensor<32x193xf32> {omni.name = "adamw.m.mlp.0.weight"},
                      %mb1: tensor<32xf32> {omni.name = "adamw.m.mlp.0.bias"},
                      %mw2: tensor<192x32xf32> {omni.name = "adamw.m.mlp.2.weight"},
                      %mb2: tensor<192xf32> {omni.name = "adamw.m.mlp.2.bias"},
                      %vw1: tensor<32x193xf32> {omni.name = "adamw.v.mlp.0.weight"},
                      %vb1: tensor<32xf32> {omni.name = "adamw.v.mlp.0.bias"},
                      %vw2: tensor<192x32xf32> {omni.name = "adamw.v.mlp.2.weight"},
                      %vb2: tensor<192xf32> {omni.name = "adamw.v.mlp.2.bias"},
                      %t: tensor<i64> {omni.name = "adamw.step"},
                      %seed: tensor<i64>, %iteration: tensor<i64>)
    -> (tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>,
        tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>,
        tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>,
        tensor<i64>, tensor<f32> {omni.name = "loss"},
        tensor<f32> {omni.name = "reward_mean"},
        tensor<f32> {omni.name = "grad_norm"}) {
  %final, %xs, %lps, %rewards = func.call @rollout(%w1, %b1, %w2, %b2, %seed, %iteration) : (tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>, tensor<i64>, tensor<i64>) -> (!x, tensor<4x8x192xf32>, tensor<4x8xf32>, tensor<8xf32>)
  %adv = omni.group_advantages %rewards {group_size = 4} : tensor<8xf32>
  %loss, %akl, %cf, %g1, %g2, %g3, %g4 = omni.value_and_grad @loss(%w1, %b1, %w2, %b2, %xs, %lps, %adv) wrt = [0, 1, 2, 3] : (tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>, tensor<4x8x192xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>)
  %c:4, %norm = omni.clip_grad_norm %g1, %g2, %g3, %g4 {max_norm = 1.0} : tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>
  %one = omni.constant dense<1> : tensor<i64>
  %t1 = omni.add %t, %one : tensor<i64>
  %w1n, %mw1n, %vw1n = omni.adamw %w1, %c#0, %mw1, %vw1, %t1 {lr = 1.0e-3} : tensor<32x193xf32>
  %b1n, %mb1n, %vb1n = omni.adamw %b1, %c#1, %mb1, %vb1, %t1 {lr = 1.0e-3} : tensor<32xf32>
  %w2n, %mw2n, %vw2n = omni.adamw %w2, %c#2, %mw2, %vw2, %t1 {lr = 1.0e-3} : tensor<192x32xf32>
  %b2n, %mb2n, %vb2n = omni.adamw %b2, %c#3, %mb2, %vb2, %t1 {lr = 1.0e-3} : tensor<192xf32>
  %rmean = omni.reduce mean %rewards dims = [0] : tensor<8xf32> -> tensor<f32>
  return %w1n, %b1n, %w2n, %b2n, %mw1n, %mb1n, %mw2n, %mb2n, %vw1n, %vb1n, %vw2n, %vb2n, %t1, %loss, %rmean, %norm
      : tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>,
        tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>,
        tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>,
        tensor<i64>, tensor<f32>, tensor<f32>, tensor<f32>
}

/// AdamW state before the first step: zero moments, step count 0.
func.func @init_optimizer()
    -> (tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>,
        tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>,
        tensor<i64>) {
  %a = omni.constant dense<0.0> : tensor<32x193xf32>
  %b = omni.constant dense<0.0> : tensor<32xf32>
  %c = omni.constant dense<0.0> : tensor<192x32xf32>
  %d = omni.constant dense<0.0> : tensor<192xf32>
  %t = omni.constant dense<0> : tensor<i64>
  return %a, %b, %c, %d, %a, %b, %c, %d, %t
      : tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>,
        tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>,
        tensor<i64>
}

/// The whole training state before the first iteration, in @train_step's
/// order: parameters from @init, zero AdamW moments, step count 0.
func.func @init_state(%seed: tensor<i64>)
    -> (tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>,
        tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>,
        tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>,
        tensor<i64>) {
  %w1, %b1, %w2, %b2 = func.call @init(%seed) : (tensor<i64>) -> (tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>)
  %o:9 = func.call @init_optimizer() : () -> (tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>, tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>, tensor<i64>)
  return %w1, %b1, %w2, %b2, %o#0, %o#1, %o#2, %o#3, %o#4, %o#5, %o#6, %o#7, %o#8
      : tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>,
        tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>,
        tensor<32x193xf32>, tensor<32xf32>, tensor<192x32xf32>, tensor<192xf32>,
        tensor<i64>
}
