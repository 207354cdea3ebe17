// RUN: omni-opt %s -omni-resident-state -split-input-file | FileCheck %s

// Tests that a training step gets omni.state on its named state arguments
// and the matching leading results, that seed, iteration, data inputs and
// metrics stay plain, and that @init_state's results get the step's names.
// CHECK-LABEL: func.func @init_state
// CHECK-SAME: -> (tensor<4xf32> {omni.state = "transformer.w"}, tensor<4xf32> {omni.state = "adamw.m.transformer.w"}, tensor<i64> {omni.state = "adamw.step"})
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %{{.*}}: tensor<4xf32> {omni.name = "transformer.w", omni.state = "transformer.w"}
// CHECK-SAME: %{{.*}}: tensor<4xf32> {omni.name = "adamw.m.transformer.w", omni.state = "adamw.m.transformer.w"}
// CHECK-SAME: %{{.*}}: tensor<i64> {omni.name = "adamw.step", omni.state = "adamw.step"}
// CHECK-SAME: %{{[^:]*}}: tensor<i64>, %{{[^:]*}}: tensor<i64>,
// CHECK-SAME: %{{.*}}: tensor<2x3xf32> {omni.name = "pooled_prompt_embeds"})
// CHECK-SAME: -> (tensor<4xf32> {omni.state = "transformer.w"}, tensor<4xf32> {omni.state = "adamw.m.transformer.w"}, tensor<i64> {omni.state = "adamw.step"}, tensor<f32> {omni.name = "loss"})
func.func @init_state(%seed: tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<i64>) {
  %w = omni.constant dense<1.0> : tensor<4xf32>
  %t = omni.constant dense<0> : tensor<i64>
  return %w, %w, %t : tensor<4xf32>, tensor<4xf32>, tensor<i64>
}
func.func @train_step(%w: tensor<4xf32> {omni.name = "transformer.w"},
                      %m: tensor<4xf32> {omni.name = "adamw.m.transformer.w"},
                      %t: tensor<i64> {omni.name = "adamw.step"},
                      %seed: tensor<i64>, %iteration: tensor<i64>,
                      %pp: tensor<2x3xf32> {omni.name = "pooled_prompt_embeds"})
    -> (tensor<4xf32>, tensor<4xf32>, tensor<i64>, tensor<f32> {omni.name = "loss"}) {
  %l = omni.reduce sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
  return %w, %m, %t, %l : tensor<4xf32>, tensor<4xf32>, tensor<i64>, tensor<f32>
}

// -----

// Tests that CFG's negative prompt inputs are data inputs too (after the
// prompts, docs/prompts.md): the state before seed and iteration still gets
// its slots.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %{{.*}}: tensor<4xf32> {omni.name = "transformer.w", omni.state = "transformer.w"}
// CHECK-SAME: %{{[^:]*}}: tensor<i64>, %{{[^:]*}}: tensor<i64>,
// CHECK-SAME: %{{.*}}: tensor<2x3xf32> {omni.name = "pooled_prompt_embeds"},
// CHECK-SAME: %{{.*}}: tensor<1x3xf32> {omni.name = "negative_pooled_prompt_embeds"})
// CHECK-SAME: -> (tensor<4xf32> {omni.state = "transformer.w"}, tensor<f32> {omni.name = "loss"})
func.func @train_step(%w: tensor<4xf32> {omni.name = "transformer.w"},
                      %seed: tensor<i64>, %iteration: tensor<i64>,
                      %pp: tensor<2x3xf32> {omni.name = "pooled_prompt_embeds"},
                      %np: tensor<1x3xf32> {omni.name = "negative_pooled_prompt_embeds"})
    -> (tensor<4xf32>, tensor<f32> {omni.name = "loss"}) {
  %l = omni.reduce sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
  return %w, %l : tensor<4xf32>, tensor<f32>
}

// -----

// Tests that several steps over the same state share its names, and that
// an initializer whose results are named takes the names it gives.
// CHECK-LABEL: func.func @step_a
// CHECK-SAME: {omni.name = "w", omni.state = "w"}
// CHECK-SAME: -> (tensor<4xf32> {omni.state = "w"})
// CHECK-LABEL: func.func @step_b
// CHECK-SAME: {omni.name = "w", omni.state = "w"}
// CHECK-SAME: -> (tensor<4xf32> {omni.state = "w"}, tensor<f32>)
// CHECK-LABEL: func.func @init_named
// CHECK-SAME: -> (tensor<4xf32> {omni.name = "w", omni.state = "w"})
func.func @step_a(%w: tensor<4xf32> {omni.name = "w"}, %seed: tensor<i64>,
                  %iteration: tensor<i64>) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}
func.func @step_b(%w: tensor<4xf32> {omni.name = "w"}, %seed: tensor<i64>,
                  %iteration: tensor<i64>) -> (tensor<4xf32>, tensor<f32>) {
  %l = omni.reduce sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
  return %w, %l : tensor<4xf32>, tensor<f32>
}
func.func @init_named(%seed: tensor<i64>) -> (tensor<4xf32> {omni.name = "w"}) {
  %w = omni.constant dense<1.0> : tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

// Tests that explicit omni.state attributes are kept as written (state
// need not lead, nor be named by omni.name) and that the pass infers
// nothing more for that function.
// CHECK-LABEL: func.func @explicit
// CHECK-SAME: (%{{[^:]*}}: tensor<4xf32>, %{{[^:]*}}: tensor<4xf32> {omni.state = "b"}, %{{[^:]*}}: tensor<i64>, %{{[^:]*}}: tensor<i64>)
// CHECK-SAME: -> (tensor<f32>, tensor<4xf32> {omni.state = "b"})
func.func @explicit(%x: tensor<4xf32>, %b: tensor<4xf32> {omni.state = "b"},
                    %seed: tensor<i64>, %iteration: tensor<i64>)
    -> (tensor<f32>, tensor<4xf32> {omni.state = "b"}) {
  %l = omni.reduce sum %x dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l, %b : tensor<f32>, tensor<4xf32>
}

// -----

// Tests that functions outside the convention are unchanged: unnamed
// state, results that do not start with the state, no iteration, a
// trailing input that is not a data input, private functions, and an
// initializer whose results match no step.
// CHECK-LABEL: func.func @negative_unnamed
// CHECK-NOT: omni.state
// CHECK-LABEL: func.func @negative_results
// CHECK-NOT: omni.state
// CHECK-LABEL: func.func @negative_no_iteration
// CHECK-NOT: omni.state
// CHECK-LABEL: func.func @negative_trailing
// CHECK-NOT: omni.state
// CHECK-LABEL: func.func private @negative_private
// CHECK-NOT: omni.state
// CHECK-LABEL: func.func @negative_init
// CHECK-NOT: omni.state
func.func @negative_unnamed(%w: tensor<4xf32>, %seed: tensor<i64>,
                            %iteration: tensor<i64>) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}
func.func @negative_results(%w: tensor<4xf32> {omni.name = "w"},
                            %seed: tensor<i64>, %iteration: tensor<i64>)
    -> tensor<f32> {
  %l = omni.reduce sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
func.func @negative_no_iteration(%w: tensor<4xf32> {omni.name = "w"},
                                 %seed: tensor<i64>) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}
func.func @negative_trailing(%w: tensor<4xf32> {omni.name = "w"},
                             %seed: tensor<i64>, %iteration: tensor<i64>,
                             %x: tensor<2xf32>) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}
func.func private @negative_private(%w: tensor<4xf32> {omni.name = "w"},
                                    %seed: tensor<i64>, %iteration: tensor<i64>)
    -> tensor<4xf32> {
  return %w : tensor<4xf32>
}
func.func @negative_init(%seed: tensor<i64>) -> tensor<8xf32> {
  %w = omni.constant dense<1.0> : tensor<8xf32>
  return %w : tensor<8xf32>
}
