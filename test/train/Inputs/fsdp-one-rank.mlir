// The unsharded twin of fsdp-two-ranks.mlir (test/train/fsdp-ranks.test):
// one parameter `transformer.proj.weight` [5, 4], random from the seed; per
// iteration the gradient is the prompts' mean embedding broadcast over the
// rows, scaled by the row number, and w -= 0.125 * g; the metric `loss` is
// mean(w'^2).

!w = tensor<5x4xf32>

func.func @init_state(%seed: tensor<i64>) -> !w {
  %c = omni.constant dense<7> : tensor<i64>
  %z = omni.constant dense<0> : tensor<i64>
  %w = omni.random_uniform %seed, %c, %z : !w
  return %w : !w
}

/// The gradient: row r of the prompts' mean embedding times r + 1.
func.func private @grad(%pe: tensor<2x3x4xf32>) -> !w {
  %feat = omni.reduce mean %pe dims = [0, 1] : tensor<2x3x4xf32> -> tensor<4xf32>
  %fb = omni.broadcast_in_dim %feat, dims = [1] : tensor<4xf32> -> !w
  %rows = omni.constant dense<[[1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0],
                               [3.0, 3.0, 3.0, 3.0], [4.0, 4.0, 4.0, 4.0],
                               [5.0, 5.0, 5.0, 5.0]]> : !w
  %g = omni.mul %fb, %rows : !w
  return %g : !w
}

func.func @train_step(%w: !w {omni.name = "transformer.proj.weight"},
                      %seed: tensor<i64>, %iteration: tensor<i64>,
                      %pe: tensor<2x3x4xf32> {omni.name = "prompt_embeds"})
    -> (!w, tensor<f32> {omni.name = "loss"}) {
  %g = func.call @grad(%pe) : (tensor<2x3x4xf32>) -> !w
  %lr = omni.constant dense<0.125> : !w
  %s = omni.mul %g, %lr : !w
  %w2 = omni.sub %w, %s : !w
  %sq = omni.mul %w2, %w2 : !w
  %loss = omni.reduce mean %sq dims = [0, 1] : !w -> tensor<f32>
  return %w2, %loss : !w, tensor<f32>
}
