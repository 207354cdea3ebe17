// grpo_loss's kl_form = exact is the KL of the two Gaussian transitions of
// the step, for both step types, compiled (omnic + omnirun) and on the
// reference evaluator. The policy and the reference step start from the same
// x with different velocities. The transition std q is measured from the
// rollout step itself (x' = mu + q e, so q = (x' - mu) / e), and the closed
// form KL(N(mu, q^2) || N(mu_ref, q^2)) = mean((mu - mu_ref)^2) / (2 q^2)
// must equal the reported kl to 1e-5 relative. For cps the std sde_step
// returns already is q: it used to be scaled by sqrt(-dt) a second time,
// which gave kl / (-dt) (here about 11x too large).
//
// RUN: omnic %s -o %t.bin
// RUN: omnirun %t.bin --function=sde --input=1x4xf32=0.5,-1,2,0 --input=1x4xf32=-0.3,0.8,-1.5,0.25 --input=1x4xf32=-0.2,0.7,-1.6,0.35 --input=1x4xf32=1,-0.5,0.25,2 | FileCheck %s
// RUN: omnirun %t.bin --function=cps --input=1x4xf32=0.5,-1,2,0 --input=1x4xf32=-0.3,0.8,-1.5,0.25 --input=1x4xf32=-0.2,0.7,-1.6,0.35 --input=1x4xf32=1,-0.5,0.25,2 | FileCheck %s --check-prefixes=CHECK,CPS
// RUN: omni-eval %s --function=sde --input=1x4xf32=0.5,-1,2,0 --input=1x4xf32=-0.3,0.8,-1.5,0.25 --input=1x4xf32=-0.2,0.7,-1.6,0.35 --input=1x4xf32=1,-0.5,0.25,2 | FileCheck %s
// RUN: omni-eval %s --function=cps --input=1x4xf32=0.5,-1,2,0 --input=1x4xf32=-0.3,0.8,-1.5,0.25 --input=1x4xf32=-0.2,0.7,-1.6,0.35 --input=1x4xf32=1,-0.5,0.25,2 | FileCheck %s --check-prefixes=CHECK,CPS
//
// result[0] is the exact kl, result[1] the closed form, result[2] whether
// they agree; for cps result[3] is the reference-form kl, which equals the
// exact one there.
// CHECK: result[2]: tensor<i1>=1
// CPS: result[3]: tensor<i1>=1

func.func @sde(%x: tensor<1x4xf32>, %v: tensor<1x4xf32>, %vref: tensor<1x4xf32>, %e: tensor<1x4xf32>) -> (tensor<f32>, tensor<f32>, tensor<i1>) {
  %sigmas, %ts = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %next, %lp0, %mu0, %std0 = omni.sde_step sde %x, %v, %sigmas[%c2] noise %e {noise_level = 0.7} : tensor<1x4xf32>, tensor<11xf32>
  %n1, %lp, %mu, %std = omni.sde_step sde %x, %v, %sigmas[%c2] next %next {noise_level = 0.7} : tensor<1x4xf32>, tensor<11xf32>
  %n2, %lpr, %mur, %stdr = omni.sde_step sde %x, %vref, %sigmas[%c2] next %next {noise_level = 0.7} : tensor<1x4xf32>, tensor<11xf32>
  %s0 = tensor.extract %sigmas[%c2] : tensor<11xf32>
  %s1 = tensor.extract %sigmas[%c3] : tensor<11xf32>
  %t0 = tensor.from_elements %s0 : tensor<f32>
  %t1 = tensor.from_elements %s1 : tensor<f32>
  %dt = omni.sub %t1, %t0 : tensor<f32>
  %l, %akl, %cf, %kl = omni.grpo_loss %lp, %lp, %lp kl(%mu, %mur, %std) dt(%dt) {beta = 0.04, kl_form = #omni.kl_form<exact>} : (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  %want, %ok = call @closed_form(%kl, %next, %mu0, %e, %mu, %mur) : (tensor<f32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>) -> (tensor<f32>, tensor<i1>)
  return %kl, %want, %ok : tensor<f32>, tensor<f32>, tensor<i1>
}

func.func @cps(%x: tensor<1x4xf32>, %v: tensor<1x4xf32>, %vref: tensor<1x4xf32>, %e: tensor<1x4xf32>) -> (tensor<f32>, tensor<f32>, tensor<i1>, tensor<i1>) {
  %sigmas, %ts = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
  %c2 = arith.constant 2 : index
  %next, %lp0, %mu0, %std0 = omni.sde_step cps %x, %v, %sigmas[%c2] noise %e {noise_level = 0.8} : tensor<1x4xf32>, tensor<11xf32>
  %n1, %lp, %mu, %std = omni.sde_step cps %x, %v, %sigmas[%c2] next %next {noise_level = 0.8} : tensor<1x4xf32>, tensor<11xf32>
  %n2, %lpr, %mur, %stdr = omni.sde_step cps %x, %vref, %sigmas[%c2] next %next {noise_level = 0.8} : tensor<1x4xf32>, tensor<11xf32>
  %l, %akl, %cf, %kl = omni.grpo_loss %lp, %lp, %lp kl(%mu, %mur, %std) {beta = 0.04, kl_form = #omni.kl_form<exact>, sde_type = #omni.sde_type<cps>} : (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  %lr, %aklr, %cfr, %klr = omni.grpo_loss %lp, %lp, %lp kl(%mu, %mur, %std) {beta = 0.04} : (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  %want, %ok = call @closed_form(%kl, %next, %mu0, %e, %mu, %mur) : (tensor<f32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>) -> (tensor<f32>, tensor<i1>)
  %same = omni.compare eq, %kl, %klr : tensor<f32>
  return %kl, %want, %ok, %same : tensor<f32>, tensor<f32>, tensor<i1>, tensor<i1>
}

// q = (x' - mu) / e from the rollout step (element 0; every element has the
// same q); want = mean((mu - mu_ref)^2) / (2 q^2); ok = |kl - want| <= 1e-5 want.
func.func private @closed_form(%kl: tensor<f32>, %next: tensor<1x4xf32>, %mu0: tensor<1x4xf32>, %e: tensor<1x4xf32>, %mu: tensor<1x4xf32>, %mur: tensor<1x4xf32>) -> (tensor<f32>, tensor<i1>) {
  %c0 = arith.constant 0 : index
  %next1 = omni.reshape %next : tensor<1x4xf32> -> tensor<4xf32>
  %mu01 = omni.reshape %mu0 : tensor<1x4xf32> -> tensor<4xf32>
  %e1 = omni.reshape %e : tensor<1x4xf32> -> tensor<4xf32>
  %a = tensor.extract %next1[%c0] : tensor<4xf32>
  %b = tensor.extract %mu01[%c0] : tensor<4xf32>
  %n = tensor.extract %e1[%c0] : tensor<4xf32>
  %ta = tensor.from_elements %a : tensor<f32>
  %tb = tensor.from_elements %b : tensor<f32>
  %tn = tensor.from_elements %n : tensor<f32>
  %diff0 = omni.sub %ta, %tb : tensor<f32>
  %q = omni.div %diff0, %tn : tensor<f32>
  %d = omni.sub %mu, %mur : tensor<1x4xf32>
  %d2 = omni.mul %d, %d : tensor<1x4xf32>
  %m = omni.reduce mean %d2 dims = [0, 1] : tensor<1x4xf32> -> tensor<f32>
  %q2 = omni.mul %q, %q : tensor<f32>
  %two = omni.constant dense<2.0> : tensor<f32>
  %den = omni.mul %two, %q2 : tensor<f32>
  %want = omni.div %m, %den : tensor<f32>
  %err = omni.sub %kl, %want : tensor<f32>
  %abserr = omni.abs %err : tensor<f32>
  %rel = omni.constant dense<1.0e-5> : tensor<f32>
  %tol = omni.mul %want, %rel : tensor<f32>
  %ok = omni.compare le, %abserr, %tol : tensor<f32>
  return %want, %ok : tensor<f32>, tensor<i1>
}
