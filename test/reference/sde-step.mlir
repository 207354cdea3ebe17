// RUN: omni-eval %s --function=sde_std | FileCheck %s --check-prefix=STD
// RUN: omni-eval %s --function=cps_std --input=i64=0 | FileCheck %s --check-prefix=CPS0
// RUN: omni-eval %s --function=cps_std --input=i64=1 | FileCheck %s --check-prefix=CPS1
// RUN: omni-eval %s --function=cps_std --input=i64=9 | FileCheck %s --check-prefix=CPS9
// RUN: omni-eval %s --function=sde_one_step --input=1x4xf32=0.5,-1,2,0 \
// RUN:   --input=1x4xf32=-0.3,0.8,-1.5,0.25 --input=1x4xf32=1,-0.5,0.25,2 \
// RUN:   | FileCheck %s --check-prefix=SDE
// RUN: omni-eval %s --function=sde_one_step --input=1x4xf32=0.5,-1,2,0 \
// RUN:   --input=1x4xf32=-0.3,0.8,-1.5,0.25 --input=1x4xf32=1,-0.5,0.25,2 \
// RUN:   --precision=f64 | FileCheck %s --check-prefix=SDE64
// RUN: omni-eval %s --function=cps_one_step --input=1x4xf32=0.5,-1,2,0 \
// RUN:   --input=1x4xf32=-0.3,0.8,-1.5,0.25 --input=1x4xf32=1,-0.5,0.25,2 \
// RUN:   | FileCheck %s --check-prefix=CPS
// RUN: omni-eval %s --function=training_step --input=1x4xf32=0.5,-1,2,0 \
// RUN:   --input=1x4xf32=-0.3,0.8,-1.5,0.25 --input=1x4xf32=1,-0.5,0.25,2 \
// RUN:   | FileCheck %s --check-prefix=TRAIN
// RUN: omni-eval %s --function=euler --input=1x4xf32=0.5,-1,2,0 \
// RUN:   --input=1x4xf32=-0.3,0.8,-1.5,0.25 --input=1x4xf32=1,-0.5,0.25,2 \
// RUN:   | FileCheck %s --check-prefix=EULER
// RUN: not omni-eval %s --function=cps_std --input=i64=10 2>&1 \
// RUN:   | FileCheck %s --check-prefix=RANGE

// sde_step against the numbers of docs/flowgrpo-math.md section 8 (SD3.5 schedule,
// N = 10). Printed values are float32 (9 digits); the documented values,
// good to about 1e-6 relative, are in the comments.

// Tests std_dev (a = 0.7) at steps 0..3: 3.5056713, 3.4350739, 2.2726343,
// 1.7185003, and the transition std q = std_dev sqrt(s[i] - s[i+1]) at steps
// 0..2: 0.7000000, 0.7429641, 0.5361523 (at step 0, q equals a). The loop
// collects one value per step with tensor.insert.
// STD: result[0]: tensor<4xf32>=[3.50567126 3.43507385 2.27263427 1.71850026]
// STD: result[1]: tensor<3xf32>=[0.699999928 0.742964089 0.536152303]
func.func @sde_std() -> (tensor<4xf32>, tensor<3xf32>) {
  %sigmas, %ts = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
  %z = omni.constant dense<0.0> : tensor<1x4xf32>
  %stds0 = tensor.empty() : tensor<4xf32>
  %qs0 = tensor.empty() : tensor<3xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %stds, %qs = scf.for %i = %c0 to %c4 step %c1
      iter_args(%stds_i = %stds0, %qs_i = %qs0) -> (tensor<4xf32>, tensor<3xf32>) {
    %xn, %lp, %mu, %std = omni.sde_step sde %z, %z, %sigmas[%i] noise %z {noise_level = 0.7} : tensor<1x4xf32>, tensor<11xf32>
    %s = tensor.extract %std[] : tensor<f32>
    %stds_n = tensor.insert %s into %stds_i[%i] : tensor<4xf32>
    %has_q = arith.cmpi ult, %i, %c3 : index
    %qs_n = scf.if %has_q -> tensor<3xf32> {
      %i1 = arith.addi %i, %c1 : index
      %si = tensor.extract %sigmas[%i] : tensor<11xf32>
      %sn = tensor.extract %sigmas[%i1] : tensor<11xf32>
      %d = arith.subf %si, %sn : f32
      %dt = tensor.from_elements %d : tensor<f32>
      %root = omni.sqrt %dt : tensor<f32>
      %q = omni.mul %std, %root : tensor<f32>
      %qv = tensor.extract %q[] : tensor<f32>
      %qs_new = tensor.insert %qv into %qs_i[%i] : tensor<3xf32>
      scf.yield %qs_new : tensor<3xf32>
    } else {
      scf.yield %qs_i : tensor<3xf32>
    }
    scf.yield %stds_n, %qs_n : tensor<4xf32>, tensor<3xf32>
  }
  return %stds, %qs : tensor<4xf32>, tensor<3xf32>
}

// Tests the cps std (a = 0.8) at steps 0 and 1: 0.9131373, 0.8686465; at
// the last step it is 0.
// CPS0: result[0]: tensor<f32>=0.913137257
// CPS1: result[0]: tensor<f32>=0.868646502
// CPS9: result[0]: tensor<f32>=0
func.func @cps_std(%i: index) -> tensor<f32> {
  %sigmas, %ts = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
  %z = omni.constant dense<0.0> : tensor<1x4xf32>
  // Step N is outside the schedule: the error names the op and its location.
  // RANGE: omni-eval: {{.*}}sde-step.mlir:[[@LINE+1]]:{{[0-9]+}}: 'omni.sde_step' step must be in [0, 10) for 11 sigmas but is 10
  %xn, %lp, %mu, %std = omni.sde_step cps %z, %z, %sigmas[%i] noise %z {noise_level = 0.8} : tensor<1x4xf32>, tensor<11xf32>
  return %std : tensor<f32>
}

// Tests one rollout step 0, type sde, a = 0.7, with x = [0.5, -1, 2, 0],
// v = [-0.3, 0.8, -1.5, 0.25], e = [1, -0.5, 0.25, 2]:
// mu = [0.3894612, -0.7868966, 1.5698061, -0.0099677],
// x' = [1.0894611, -1.1368966, 1.7448061, 1.3900322], log_prob = -1.2263260.
// SDE: result[0]: tensor<1x4xf32>={{\[\[}}0.389461219 -0.786896586 1.5698061 -0.00996766984]]
// SDE: result[1]: tensor<1x4xf32>={{\[\[}}1.08946109 -1.13689661 1.74480605 1.39003217]]
// SDE: result[2]: tensor<1xf32>=[-1.22632599]
// The float64 oracle agrees with them to about 1e-7 relative.
// SDE64: result[0]: tensor<1x4xf32>={{\[\[}}0.3894612{{[0-9]+}} -0.7868965{{[0-9]+}} 1.569806{{[0-9]+}} -0.009967669{{[0-9]+}}]]
// SDE64: result[1]: tensor<1x4xf32>={{\[\[}}1.089461{{[0-9]+}} -1.136896{{[0-9]+}} 1.744806{{[0-9]+}} 1.390032{{[0-9]+}}]]
// SDE64: result[2]: tensor<1xf32>=[-1.226326{{[0-9]+}}]
func.func @sde_one_step(%x: tensor<1x4xf32>, %v: tensor<1x4xf32>, %e: tensor<1x4xf32>)
    -> (tensor<1x4xf32>, tensor<1x4xf32>, tensor<1xf32>) {
  %sigmas, %ts = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
  %c0 = arith.constant 0 : index
  %xn, %lp, %mu, %std = omni.sde_step sde %x, %v, %sigmas[%c0] noise %e {noise_level = 0.7} : tensor<1x4xf32>, tensor<11xf32>
  return %mu, %xn, %lp : tensor<1x4xf32>, tensor<1x4xf32>, tensor<1xf32>
}

// Tests one rollout step 0, type cps, a = 0.8, same inputs:
// mu = [0.1802447, -0.3684634, 0.7329398, -0.0099677], log_prob = -1.1074166.
// CPS: result[0]: tensor<1x4xf32>={{\[\[}}0.180244669 -0.368463457 0.732939839 -0.00996766984]]
// CPS: result[1]: tensor<1xf32>=[-1.10741663]
func.func @cps_one_step(%x: tensor<1x4xf32>, %v: tensor<1x4xf32>, %e: tensor<1x4xf32>)
    -> (tensor<1x4xf32>, tensor<1xf32>) {
  %sigmas, %ts = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
  %c0 = arith.constant 0 : index
  %xn, %lp, %mu, %std = omni.sde_step cps %x, %v, %sigmas[%c0] noise %e {noise_level = 0.8} : tensor<1x4xf32>, tensor<11xf32>
  return %mu, %lp : tensor<1x4xf32>, tensor<1xf32>
}

// Tests that training (given next = the rollout's x') recomputes the
// rollout's log_prob and mean.
// TRAIN: result[0]: tensor<1xf32>=[[LP:.*]]
// TRAIN-NEXT: result[1]: tensor<1xf32>=[[LP]]
// TRAIN-NEXT: result[2]: tensor<1x4xf32>=[[MU:.*]]
// TRAIN-NEXT: result[3]: tensor<1x4xf32>=[[MU]]
func.func @training_step(%x: tensor<1x4xf32>, %v: tensor<1x4xf32>, %e: tensor<1x4xf32>)
    -> (tensor<1xf32>, tensor<1xf32>, tensor<1x4xf32>, tensor<1x4xf32>) {
  %sigmas, %ts = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
  %c3 = arith.constant 3 : index
  %xn, %lp, %mu, %std = omni.sde_step sde %x, %v, %sigmas[%c3] noise %e {noise_level = 0.7} : tensor<1x4xf32>, tensor<11xf32>
  %xn2, %lp2, %mu2, %std2 = omni.sde_step sde %x, %v, %sigmas[%c3] next %xn {noise_level = 0.7} : tensor<1x4xf32>, tensor<11xf32>
  return %lp, %lp2, %mu, %mu2 : tensor<1xf32>, tensor<1xf32>, tensor<1x4xf32>, tensor<1x4xf32>
}

// Tests that step 2, type cps, a = 0 is the Euler step x + v dt (computed
// here with primitives), with log_prob all zeros and every output finite.
// EULER: result[0]: tensor<1x4xf32>=[[MU:.*]]
// EULER-NEXT: result[1]: tensor<1x4xf32>=[[MU]]
// EULER-NEXT: result[2]: tensor<1x4xf32>=[[MU]]
// EULER-NEXT: result[3]: tensor<1xf32>=[0]
// EULER-NEXT: result[4]: tensor<f32>=0
// EULER-NEXT: result[5]: tensor<2x4xi1>={{\[\[}}1 1 1 1][1 1 1 1]]
func.func @euler(%x: tensor<1x4xf32>, %v: tensor<1x4xf32>, %e: tensor<1x4xf32>)
    -> (tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1xf32>, tensor<f32>, tensor<2x4xi1>) {
  %sigmas, %ts = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
  %c2 = arith.constant 2 : index
  %xn, %lp, %mu, %std = omni.sde_step cps %x, %v, %sigmas[%c2] noise %e {noise_level = 0.0} : tensor<1x4xf32>, tensor<11xf32>
  %s2 = omni.slice %sigmas [2:3:1] : tensor<11xf32> -> tensor<1xf32>
  %s3 = omni.slice %sigmas [3:4:1] : tensor<11xf32> -> tensor<1xf32>
  %dt = omni.sub %s3, %s2 : tensor<1xf32>
  %dtb = omni.broadcast_in_dim %dt, dims = [0] : tensor<1xf32> -> tensor<1x4xf32>
  %vdt = omni.mul %v, %dtb : tensor<1x4xf32>
  %ref = omni.add %x, %vdt : tensor<1x4xf32>
  %all = omni.concat %xn, %mu dim = 0 : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
  %finite = omni.is_finite %all : tensor<2x4xf32>
  return %mu, %ref, %xn, %lp, %std, %finite : tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1xf32>, tensor<f32>, tensor<2x4xi1>
}
