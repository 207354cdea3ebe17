// RUN: omni-eval %s --function=rollout --input=i64=5 > %t.print
// RUN: omni-eval %s --function=rollout --input=i64=5 --output=@%t.x.npy \
// RUN:   --output=@%t.lp.npy --output=- --output=- > %t.rewards
// RUN: omni-eval %s --function=identity --input=@%t.x.npy --input=@%t.lp.npy > %t.reread
// RUN: cat %t.print %t.rewards %t.reread | FileCheck %s
// RUN: omni-eval %s --function=rollout --input=i64=5 --precision=f64 \
// RUN:   | FileCheck %s --check-prefix=F64

// A small rollout written the way omni programs are: a denoising loop
// (scf.for with loop-carried latents and log-probabilities) that calls the
// velocity model (a func.func whose body is a fusion region), draws per-step
// noise from the counter RNG, runs sde_step, and scores the final sample
// with a host-call reward; sharding annotations and collectives over a
// one-rank mesh are the identity.

omni.mesh @mesh axes = ["dp"] shape = [1]

func.func @velocity(%x: tensor<2x12xf32>, %t: tensor<f32>) -> tensor<2x12xf32> {
  %v = omni.fusion (%x, %t) : (tensor<2x12xf32>, tensor<f32>) -> tensor<2x12xf32> {
  ^bb0(%xx: tensor<2x12xf32>, %tt: tensor<f32>):
    %scale = omni.constant dense<-0.001> : tensor<f32>
    %k = omni.mul %tt, %scale : tensor<f32>
    %kb = omni.broadcast_in_dim %k, dims = [] : tensor<f32> -> tensor<2x12xf32>
    %y = omni.mul %xx, %kb : tensor<2x12xf32>
    %z = omni.tanh %y : tensor<2x12xf32>
    omni.yield %z : tensor<2x12xf32>
  }
  return %v : tensor<2x12xf32>
}

// Tests that the printed results, the results written to .npy and read back,
// and the reward recomputed with primitives agree: the reward is the mean
// brightness of logistic(x) as 2 RGB 2x2 images.
// CHECK: result[0]: tensor<2x12xf32>=[[X:.*]]
// CHECK-NEXT: result[1]: tensor<2xf32>=[[LP:.*]]
// CHECK-NEXT: result[2]: tensor<2xf32>=[[R:.*]]
// CHECK-NEXT: result[3]: tensor<2xf32>=[[R]]
// CHECK-NEXT: result[2]: tensor<2xf32>=[[R]]
// CHECK-NEXT: result[3]: tensor<2xf32>=[[R]]
// CHECK-NEXT: result[0]: tensor<2x12xf32>=[[X]]
// CHECK-NEXT: result[1]: tensor<2xf32>=[[LP]]
// F64: result[2]: tensor<2xf32>=[0.{{[0-9]+}} 0.{{[0-9]+}}]
func.func @rollout(%seed: tensor<i64>)
    -> (tensor<2x12xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %sigmas, %timesteps = omni.flow_schedule static_shift steps = 4 : tensor<5xf32>, tensor<4xf32>
  %zero = omni.constant dense<0> : tensor<i64>
  %x0 = omni.random_normal %seed, %zero, %zero : tensor<2x12xf32>
  %x0s = omni.shard %x0 : tensor<2x12xf32> to #omni.sharding<@mesh, [["dp"], []]>
  %lp0 = omni.constant dense<0.0> : tensor<2xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %x, %lp = scf.for %i = %c0 to %c4 step %c1
      iter_args(%xi = %x0s, %lpi = %lp0) -> (tensor<2x12xf32>, tensor<2xf32>) {
    %i1 = arith.addi %i, %c1 : index
    %ci = arith.index_cast %i1 : index to i64
    %counter = tensor.from_elements %ci : tensor<i64>
    %e = omni.random_normal %seed, %counter, %zero : tensor<2x12xf32>
    %t = tensor.extract %timesteps[%i] : tensor<4xf32>
    %tt = tensor.from_elements %t : tensor<f32>
    %v = func.call @velocity(%xi, %tt) : (tensor<2x12xf32>, tensor<f32>) -> tensor<2x12xf32>
    %xn, %lpn, %mu, %std = omni.sde_step sde %xi, %v, %sigmas[%i] noise %e {noise_level = 0.7} : tensor<2x12xf32>, tensor<5xf32>
    %lpsum = omni.add %lpi, %lpn : tensor<2xf32>
    scf.yield %xn, %lpsum : tensor<2x12xf32>, tensor<2xf32>
  }
  %lp_all = omni.all_reduce sum %lp over @mesh ["dp"] : tensor<2xf32>
  %img = omni.reshape %x : tensor<2x12xf32> -> tensor<2x3x2x2xf32>
  %pix = omni.logistic %img : tensor<2x3x2x2xf32>
  %r = omni.host_call "brightness"(%pix) : (tensor<2x3x2x2xf32>) -> tensor<2xf32>
  %r2 = omni.reduce mean %pix dims = [1, 2, 3] : tensor<2x3x2x2xf32> -> tensor<2xf32>
  return %x, %lp_all, %r, %r2 : tensor<2x12xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

func.func @identity(%x: tensor<2x12xf32>, %lp: tensor<2xf32>) -> (tensor<2x12xf32>, tensor<2xf32>) {
  return %x, %lp : tensor<2x12xf32>, tensor<2xf32>
}
