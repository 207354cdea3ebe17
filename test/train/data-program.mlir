// A hand-written program in the training convention of
// runtime/train/driver/Trainer.h with data inputs, a reward host call, a KL
// reference copy, a LoRA adapter and an `images` result. Its metrics expose
// what the driver fed it (sums of each prompt's embeddings, of the weights)
// so tests can check prompts, --init and --reward from the outside; compiled
// by compiler/driver/TrainerTest.cpp too.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: omnic %s -o %t/p.bin
// RUN: omnirun %t/p.bin --steps 3 --seed 5 --out %t/run --save-every 2 | FileCheck %s
// RUN: ls %t/run %t/run/samples | FileCheck %s --check-prefix=FILES
// RUN: FileCheck %s --check-prefix=JSON < %t/run/metrics.jsonl
// RUN: omnirun %t/p.bin --steps 4 --seed 5 --resume %t/run | FileCheck %s --check-prefix=RESUME
// RUN: omnirun %t/p.bin --steps 1 --reward jpeg_incompressibility --sample-every 1 --out %t/jpeg | FileCheck %s --check-prefix=REWARD
// RUN: sh -c 'omnirun %t/p.bin --steps 1 --reward nope; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: sh -c 'omnirun %t/p.bin --steps 5 --seed 6 --resume=%t/run; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=SEED
// RUN: sh -c 'omnirun %t/p.bin --steps 1 --prompts %t/missing.safetensors; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=PROMPTS
// RUN: sh -c 'omnirun %t/p.bin --steps 1 --init %t/p.bin; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=INIT

// CHECK: prompts: 16 from synthetic, 2 per iteration
// CHECK-NEXT: iter 1/3  reward 0.{{[0-9]+}} ± 0.{{[0-9]+}}  loss {{[0-9.e+-]+}}  prompt_sum_0 {{[0-9.e+-]+}}  prompt_sum_1 {{.*}}  pooled_sum_0 {{.*}}  pooled_sum_1 {{.*}}  weight_sum {{.*}}  ref_sum {{.*}}  image_mean 0.{{[0-9]+}}  time {{[0-9.e+-]+}} s (reward {{[0-9.e+-]+}} s, compute {{[0-9.e+-]+}} s)  elapsed {{([0-9]+m)?[0-9]+s}}  eta {{([0-9]+m)?[0-9]+s}}{{$}}
// CHECK-NEXT: iter 2/3  reward {{.*}}  elapsed {{([0-9]+m)?[0-9]+s}}  eta {{([0-9]+m)?[0-9]+s}}{{$}}
// CHECK-NEXT: iter 3/3  reward {{.*}}  elapsed {{([0-9]+m)?[0-9]+s}}  eta 0s{{$}}
// CHECK-NOT: iter

// FILES: latest
// FILES-NEXT: metrics.jsonl
// FILES-NEXT: run.json
// FILES-NEXT: samples
// FILES-NEXT: step-2.safetensors
// FILES-NEXT: step-3.safetensors
// FILES: iter-2.png
// FILES-NEXT: iter-3.png

// JSON: {"iteration": 0, "loss": {{.*}}, "reward_mean": 0.{{[0-9]+}}, "reward_std": {{.*}}, "prompt_sum_0": {{.*}}, "image_mean": {{.*}}, "time_s": {{.*}}, "reward_time_s": {{.*}}, "compute_time_s": {{.*}}}
// JSON-NEXT: {"iteration": 1,
// JSON-NEXT: {"iteration": 2,

// RESUME: prompts: 16 from synthetic, 2 per iteration
// RESUME-NEXT: resumed from {{.*}}run at iteration 3
// RESUME-NEXT: iter 4/4  reward {{.*}}  eta 0s{{$}}

// REWARD: reward: brightness -> jpeg_incompressibility
// REWARD: iter 1/1  reward {{[0-9]+}}.{{[0-9]+}} ±

// UNKNOWN: omnirun: --reward: unknown reward 'nope' (known rewards: brightness, jpeg_compressibility, jpeg_incompressibility; or a server: http://HOST:PORT[/PATH] or unix:SOCKET)
// SEED: omnirun: {{.*}}run: the checkpoint was trained with seed 5 but --seed is 6
// PROMPTS: omnirun: {{.*}}missing.safetensors: open failed: No such file or directory
// INIT: omnirun: {{.*}}p.bin: header length

!w = tensor<12x4xf32>

/// The weights are U(-0.5, 0.5) from the seed; the reference copy equals
/// them; the LoRA adapter is 0.25 everywhere.
func.func @init_state(%seed: tensor<i64>) -> (!w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>) {
  %c = omni.constant dense<7> : tensor<i64>
  %z = omni.constant dense<0> : tensor<i64>
  %u = omni.random_uniform %seed, %c, %z : !w
  %half = omni.constant dense<0.5> : !w
  %w = omni.sub %u, %half : !w
  %b = omni.constant dense<0.0> : tensor<12xf32>
  %la = omni.constant dense<0.25> : tensor<2x4xf32>
  %t = omni.constant dense<0> : tensor<i64>
  return %w, %b, %w, %la, %t : !w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>
}

/// The images of an iteration: a linear layer on the mean prompt token,
/// two samples per prompt with noise keyed on (seed, iteration), squashed
/// to [0, 1] and viewed as 4 RGB images of 2x2 pixels.
func.func private @sample(%w: !w, %b: tensor<12xf32>, %pe: tensor<2x3x4xf32>,
                          %seed: tensor<i64>, %iteration: tensor<i64>)
    -> (tensor<2x12xf32>, tensor<4x3x2x2xf32>) {
  %feat = omni.reduce mean %pe dims = [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
  %h = omni.linear %feat, %w bias %b : (tensor<2x4xf32>, !w, tensor<12xf32>) -> tensor<2x12xf32>
  %hg = omni.broadcast_in_dim %h, dims = [0, 2] : tensor<2x12xf32> -> tensor<2x2x12xf32>
  %z = omni.constant dense<0> : tensor<i64>
  %noise = omni.random_normal %seed, %iteration, %z : tensor<2x2x12xf32>
  %scale = omni.constant dense<0.5> : tensor<2x2x12xf32>
  %ns = omni.mul %noise, %scale : tensor<2x2x12xf32>
  %x = omni.add %hg, %ns : tensor<2x2x12xf32>
  %sq = omni.logistic %x : tensor<2x2x12xf32>
  %images = omni.reshape %sq : tensor<2x2x12xf32> -> tensor<4x3x2x2xf32>
  return %h, %images : tensor<2x12xf32>, tensor<4x3x2x2xf32>
}

/// The sum of the elements of prompt %p's embeddings (a checksum that shows
/// which prompts the driver passed).
func.func private @promptSums(%pe: tensor<2x3x4xf32>, %pp: tensor<2x2xf32>)
    -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %p0 = omni.slice %pe [0:1:1, 0:3:1, 0:4:1] : tensor<2x3x4xf32> -> tensor<1x3x4xf32>
  %p1 = omni.slice %pe [1:2:1, 0:3:1, 0:4:1] : tensor<2x3x4xf32> -> tensor<1x3x4xf32>
  %s0 = omni.reduce sum %p0 dims = [0, 1, 2] : tensor<1x3x4xf32> -> tensor<f32>
  %s1 = omni.reduce sum %p1 dims = [0, 1, 2] : tensor<1x3x4xf32> -> tensor<f32>
  %q0 = omni.slice %pp [0:1:1, 0:2:1] : tensor<2x2xf32> -> tensor<1x2xf32>
  %q1 = omni.slice %pp [1:2:1, 0:2:1] : tensor<2x2xf32> -> tensor<1x2xf32>
  %t0 = omni.reduce sum %q0 dims = [0, 1] : tensor<1x2xf32> -> tensor<f32>
  %t1 = omni.reduce sum %q1 dims = [0, 1] : tensor<1x2xf32> -> tensor<f32>
  return %s0, %s1, %t0, %t1 : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
}

/// One iteration: sample, reward (brightness), metrics, and an update that
/// depends on the prompts, the noise and the reward (so a resumed run is
/// only bit-exact when all three are).
func.func @train_step(%w: !w {omni.name = "transformer.proj.weight"},
                      %b: tensor<12xf32> {omni.name = "transformer.proj.bias"},
                      %rw: !w {omni.name = "ref.transformer.proj.weight"},
                      %la: tensor<2x4xf32> {omni.name = "transformer.proj.lora_A.weight"},
                      %t: tensor<i64> {omni.name = "step"},
                      %seed: tensor<i64>, %iteration: tensor<i64>,
                      %pe: tensor<2x3x4xf32> {omni.name = "prompt_embeds"},
                      %pp: tensor<2x2xf32> {omni.name = "pooled_prompt_embeds"})
    -> (!w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>,
        tensor<f32> {omni.name = "loss"},
        tensor<f32> {omni.name = "reward_mean"},
        tensor<f32> {omni.name = "reward_std"},
        tensor<f32> {omni.name = "prompt_sum_0"},
        tensor<f32> {omni.name = "prompt_sum_1"},
        tensor<f32> {omni.name = "pooled_sum_0"},
        tensor<f32> {omni.name = "pooled_sum_1"},
        tensor<f32> {omni.name = "weight_sum"},
        tensor<f32> {omni.name = "ref_sum"},
        tensor<f32> {omni.name = "image_mean"},
        tensor<4x3x2x2xf32> {omni.name = "images"}) {
  %h, %images = func.call @sample(%w, %b, %pe, %seed, %iteration) : (!w, tensor<12xf32>, tensor<2x3x4xf32>, tensor<i64>, tensor<i64>) -> (tensor<2x12xf32>, tensor<4x3x2x2xf32>)
  %rewards = omni.host_call "brightness"(%images) : (tensor<4x3x2x2xf32>) -> tensor<4xf32>
  %rmean = omni.reduce mean %rewards dims = [0] : tensor<4xf32> -> tensor<f32>
  %rm4 = omni.broadcast_in_dim %rmean, dims = [] : tensor<f32> -> tensor<4xf32>
  %dev = omni.sub %rewards, %rm4 : tensor<4xf32>
  %dev2 = omni.mul %dev, %dev : tensor<4xf32>
  %var = omni.reduce mean %dev2 dims = [0] : tensor<4xf32> -> tensor<f32>
  %rstd = omni.sqrt %var : tensor<f32>
  %hh = omni.mul %h, %h : tensor<2x12xf32>
  %loss = omni.reduce mean %hh dims = [0, 1] : tensor<2x12xf32> -> tensor<f32>
  %s:4 = func.call @promptSums(%pe, %pp) : (tensor<2x3x4xf32>, tensor<2x2xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  %ws = omni.reduce sum %w dims = [0, 1] : !w -> tensor<f32>
  %rs = omni.reduce sum %rw dims = [0, 1] : !w -> tensor<f32>
  %im = omni.reduce mean %images dims = [0, 1, 2, 3] : tensor<4x3x2x2xf32> -> tensor<f32>
  // w' = 0.99 w + 0.01 reward_mean; b' = b + 0.01 mean_batch(h).
  %decay = omni.constant dense<0.99> : !w
  %wd = omni.mul %w, %decay : !w
  %rmw = omni.broadcast_in_dim %rmean, dims = [] : tensor<f32> -> !w
  %lr = omni.constant dense<0.01> : !w
  %dw = omni.mul %rmw, %lr : !w
  %w2 = omni.add %wd, %dw : !w
  %hm = omni.reduce mean %h dims = [0] : tensor<2x12xf32> -> tensor<12xf32>
  %lrb = omni.constant dense<0.01> : tensor<12xf32>
  %db = omni.mul %hm, %lrb : tensor<12xf32>
  %b2 = omni.add %b, %db : tensor<12xf32>
  %one = omni.constant dense<1> : tensor<i64>
  %t1 = omni.add %t, %one : tensor<i64>
  return %w2, %b2, %rw, %la, %t1, %loss, %rmean, %rstd, %s#0, %s#1, %s#2, %s#3, %ws, %rs, %im, %images
      : !w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>, tensor<f32>, tensor<f32>, tensor<f32>,
        tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>,
        tensor<4x3x2x2xf32>
}

/// Takes prompt_embeds only (no pooled input), calls no reward.
func.func @step_embeds_only(%w: !w {omni.name = "transformer.proj.weight"},
                            %b: tensor<12xf32> {omni.name = "transformer.proj.bias"},
                            %rw: !w {omni.name = "ref.transformer.proj.weight"},
                            %la: tensor<2x4xf32> {omni.name = "transformer.proj.lora_A.weight"},
                            %t: tensor<i64> {omni.name = "step"},
                            %seed: tensor<i64>, %iteration: tensor<i64>,
                            %pe: tensor<2x3x4xf32> {omni.name = "prompt_embeds"})
    -> (!w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>,
        tensor<f32> {omni.name = "prompt_sum_0"}) {
  %p0 = omni.slice %pe [0:1:1, 0:3:1, 0:4:1] : tensor<2x3x4xf32> -> tensor<1x3x4xf32>
  %s0 = omni.reduce sum %p0 dims = [0, 1, 2] : tensor<1x3x4xf32> -> tensor<f32>
  return %w, %b, %rw, %la, %t, %s0 : !w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>, tensor<f32>
}

/// Convention errors, one per function.
func.func @step_unnamed_data(%w: !w {omni.name = "transformer.proj.weight"},
                             %b: tensor<12xf32> {omni.name = "transformer.proj.bias"},
                             %rw: !w {omni.name = "ref.transformer.proj.weight"},
                             %la: tensor<2x4xf32> {omni.name = "transformer.proj.lora_A.weight"},
                             %t: tensor<i64> {omni.name = "step"},
                             %seed: tensor<i64>, %iteration: tensor<i64>,
                             %x: tensor<2x2xf32>)
    -> (!w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>) {
  return %w, %b, %rw, %la, %t : !w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>
}

func.func @step_bad_embeds(%w: !w {omni.name = "transformer.proj.weight"},
                           %b: tensor<12xf32> {omni.name = "transformer.proj.bias"},
                           %rw: !w {omni.name = "ref.transformer.proj.weight"},
                           %la: tensor<2x4xf32> {omni.name = "transformer.proj.lora_A.weight"},
                           %t: tensor<i64> {omni.name = "step"},
                           %seed: tensor<i64>, %iteration: tensor<i64>,
                           %pe: tensor<2x12xf32> {omni.name = "prompt_embeds"})
    -> (!w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>) {
  return %w, %b, %rw, %la, %t : !w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>
}

func.func @step_prompt_counts(%w: !w {omni.name = "transformer.proj.weight"},
                              %b: tensor<12xf32> {omni.name = "transformer.proj.bias"},
                              %rw: !w {omni.name = "ref.transformer.proj.weight"},
                              %la: tensor<2x4xf32> {omni.name = "transformer.proj.lora_A.weight"},
                              %t: tensor<i64> {omni.name = "step"},
                              %seed: tensor<i64>, %iteration: tensor<i64>,
                              %pe: tensor<2x3x4xf32> {omni.name = "prompt_embeds"},
                              %pp: tensor<3x2xf32> {omni.name = "pooled_prompt_embeds"})
    -> (!w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>) {
  return %w, %b, %rw, %la, %t : !w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>
}

func.func @step_bad_images(%w: !w {omni.name = "transformer.proj.weight"},
                           %b: tensor<12xf32> {omni.name = "transformer.proj.bias"},
                           %rw: !w {omni.name = "ref.transformer.proj.weight"},
                           %la: tensor<2x4xf32> {omni.name = "transformer.proj.lora_A.weight"},
                           %t: tensor<i64> {omni.name = "step"},
                           %seed: tensor<i64>, %iteration: tensor<i64>)
    -> (!w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>,
        tensor<2x4x3x2xf32> {omni.name = "images"}) {
  %img = omni.constant dense<0.5> : tensor<2x4x3x2xf32>
  return %w, %b, %rw, %la, %t, %img : !w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>, tensor<2x4x3x2xf32>
}

func.func @step_twice(%w: !w {omni.name = "transformer.proj.weight"},
                      %b: tensor<12xf32> {omni.name = "transformer.proj.bias"},
                      %rw: !w {omni.name = "ref.transformer.proj.weight"},
                      %la: tensor<2x4xf32> {omni.name = "transformer.proj.lora_A.weight"},
                      %t: tensor<i64> {omni.name = "step"},
                      %seed: tensor<i64>, %iteration: tensor<i64>,
                      %pe: tensor<2x3x4xf32> {omni.name = "prompt_embeds"},
                      %pe2: tensor<2x3x4xf32> {omni.name = "prompt_embeds"})
    -> (!w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>) {
  return %w, %b, %rw, %la, %t : !w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>
}

func.func @step_no_iteration(%w: !w {omni.name = "transformer.proj.weight"},
                             %seed: tensor<i64>) -> !w {
  return %w : !w
}

/// Images 1 and 3 of 4 are not finite (NaN, +inf): the driver reports
/// them as nonfinite_images.
func.func @step_nan_images(%w: !w {omni.name = "transformer.proj.weight"},
                           %b: tensor<12xf32> {omni.name = "transformer.proj.bias"},
                           %rw: !w {omni.name = "ref.transformer.proj.weight"},
                           %la: tensor<2x4xf32> {omni.name = "transformer.proj.lora_A.weight"},
                           %t: tensor<i64> {omni.name = "step"},
                           %seed: tensor<i64>, %iteration: tensor<i64>)
    -> (!w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>,
        tensor<4x3x2x2xf32> {omni.name = "images"}) {
  %v = omni.constant dense<[0.5, 0x7FC00000, 0.25, 0x7F800000]> : tensor<4xf32>
  %img = omni.broadcast_in_dim %v, dims = [0] : tensor<4xf32> -> tensor<4x3x2x2xf32>
  return %w, %b, %rw, %la, %t, %img : !w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>, tensor<4x3x2x2xf32>
}

func.func @step_negative_batch(%w: !w {omni.name = "transformer.proj.weight"},
                               %b: tensor<12xf32> {omni.name = "transformer.proj.bias"},
                               %rw: !w {omni.name = "ref.transformer.proj.weight"},
                               %la: tensor<2x4xf32> {omni.name = "transformer.proj.lora_A.weight"},
                               %t: tensor<i64> {omni.name = "step"},
                               %seed: tensor<i64>, %iteration: tensor<i64>,
                               %pe: tensor<2x3x4xf32> {omni.name = "prompt_embeds"},
                               %pp: tensor<2x2xf32> {omni.name = "pooled_prompt_embeds"},
                               %npp: tensor<2x2xf32> {omni.name = "negative_pooled_prompt_embeds"})
    -> (!w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>) {
  return %w, %b, %rw, %la, %t : !w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>
}

func.func @step_negative_dims(%w: !w {omni.name = "transformer.proj.weight"},
                              %b: tensor<12xf32> {omni.name = "transformer.proj.bias"},
                              %rw: !w {omni.name = "ref.transformer.proj.weight"},
                              %la: tensor<2x4xf32> {omni.name = "transformer.proj.lora_A.weight"},
                              %t: tensor<i64> {omni.name = "step"},
                              %seed: tensor<i64>, %iteration: tensor<i64>,
                              %pe: tensor<2x3x4xf32> {omni.name = "prompt_embeds"},
                              %npe: tensor<1x3x5xf32> {omni.name = "negative_prompt_embeds"})
    -> (!w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>) {
  return %w, %b, %rw, %la, %t : !w, tensor<12xf32>, !w, tensor<2x4xf32>, tensor<i64>
}
