// Tests omnirun --train on the compiled toy FlowGRPO program: one metrics
// line per iteration, checkpoints, resume, and its user-facing errors.
// RUN: rm -rf %t && mkdir -p %t
// RUN: omnic %omni_src_root/examples/flowgrpo-toy/toy.mlir -o %t/toy.bin
// RUN: omnirun %t/toy.bin --train --steps=2 --seed=7 --checkpoint-dir=%t/ckpt | FileCheck %s
// RUN: omnirun %t/toy.bin --train --steps=3 --seed=7 --checkpoint-dir=%t/ckpt --resume | FileCheck %s --check-prefix=RESUME
// RUN: sh -c 'omnirun %t/toy.bin --train --resume; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=NODIR
// RUN: sh -c 'omnirun %t/toy.bin --train --steps=-3; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=STEPS
// RUN: sh -c 'omnirun %t/toy.bin --train --steps=4 --seed=8 --checkpoint-dir=%t/ckpt --resume; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=SEED

// CHECK: iteration 0  loss {{.*}}  reward_mean -0.00{{[0-9]+}}  grad_norm {{.*}}
// CHECK-NEXT: iteration 1  loss
// CHECK-NOT: iteration 2
// RESUME: resumed from {{.*}}ckpt at iteration 2
// RESUME-NEXT: iteration 2  loss
// NODIR: omnirun: --resume needs --checkpoint-dir
// STEPS: omnirun: --steps expects a non-negative integer, found '-3'
// SEED: omnirun: {{.*}}ckpt: the checkpoint was trained with seed 7 but --seed is 8
