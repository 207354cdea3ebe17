// One FlowGRPO rollout step and its loss on a 2-prompt x 2-sample batch,
// written by hand in the omni dialect. The velocity "model" is a single
// linear layer; the reward is a host call. omni-eval evaluates it and
// omnic compiles it (test/omnic/examples.mlir).

func.func @step(%w: tensor<48x48xf32>, %x: tensor<4x48xf32>,
                %seed: tensor<i64>, %iteration: tensor<i64>,
                %old_lp: tensor<4xf32>)
    -> (tensor<f32>, tensor<4xf32>) {
  %sigmas, %timesteps = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
  %i = arith.constant 0 : index
  %zero = arith.constant dense<0> : tensor<i64>
  %e = omni.random_normal %seed, %iteration, %zero : tensor<4x48xf32>
  %v = omni.linear %x, %w : (tensor<4x48xf32>, tensor<48x48xf32>) -> tensor<4x48xf32>
  %xn, %lp, %mu, %std = omni.sde_step sde %x, %v, %sigmas[%i] noise %e : tensor<4x48xf32>, tensor<11xf32>
  %img = omni.reshape %xn : tensor<4x48xf32> -> tensor<4x3x4x4xf32>
  %r = omni.host_call "brightness"(%img) : (tensor<4x3x4x4xf32>) -> tensor<4xf32>
  %adv = omni.group_advantages %r {group_size = 2} : tensor<4xf32>
  %loss, %approx_kl, %clipfrac, %kl = omni.grpo_loss %lp, %old_lp, %adv : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  return %loss, %lp : tensor<f32>, tensor<4xf32>
}
