// A small program in the training convention (runtime/train/driver/
// Trainer.h) whose step returns a `rewards` result: 4 images of 2x24
// pixels (wide enough for captions), 2 prompts of 2 samples each, scored by
// the brightness reward; `rewards` is that reward plus 1, so a grid whose
// captions show it is told apart from one that shows the reward call's
// values. test/train/run-logs.test compiles it, and a copy with !r of 3
// elements (sed) to check the one-line error for a count other than B.

!r = tensor<4xf32>

func.func @init_state(%seed: tensor<i64>) -> (tensor<4xf32>) {
  %w = omni.constant dense<0.0> : tensor<4xf32>
  return %w : tensor<4xf32>
}

func.func @train_step(%w: tensor<4xf32> {omni.name = "transformer.w"},
                      %seed: tensor<i64>, %iteration: tensor<i64>,
                      %pe: tensor<2x1x4xf32> {omni.name = "prompt_embeds"})
    -> (tensor<4xf32>, tensor<f32> {omni.name = "reward_mean"},
        !r {omni.name = "rewards"},
        tensor<4x3x2x24xf32> {omni.name = "images"}) {
  %z = omni.constant dense<0> : tensor<i64>
  %images = omni.random_uniform %seed, %iteration, %z : tensor<4x3x2x24xf32>
  %rewards = omni.host_call "brightness"(%images) : (tensor<4x3x2x24xf32>) -> tensor<4xf32>
  %rmean = omni.reduce mean %rewards dims = [0] : tensor<4xf32> -> tensor<f32>
  %one = omni.constant dense<1.0> : tensor<4xf32>
  %shifted = omni.add %rewards, %one : tensor<4xf32>
  %out = omni.slice %shifted [0:4:1] : tensor<4xf32> -> !r
  %w2 = omni.add %w, %rewards : tensor<4xf32>
  return %w2, %rmean, %out, %images : tensor<4xf32>, tensor<f32>, !r, tensor<4x3x2x24xf32>
}
