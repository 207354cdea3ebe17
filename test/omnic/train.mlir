// Tests omnirun --train on the compiled toy FlowGRPO program: one metrics
// line per iteration, checkpoints, resume, and its user-facing errors.
// RUN: rm -rf %t && mkdir -p %t
// RUN: omnic %omni_src_root/examples/flowgrpo-toy/toy.mlir -o %t/toy.bin
// RUN: omnirun %t/toy.bin --train --steps=2 --seed=7 --checkpoint-dir=%t/ckpt | FileCheck %s
// RUN: omnirun %t/toy.bin --train --steps=3 --seed=7 --checkpoint-dir=%t/ckpt --resume | FileCheck %s --check-prefix=RESUME
// RUN: sh -c 'omnirun %t/toy.bin --train --resume; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=NODIR
// RUN: sh -c 'omnirun %t/toy.bin --train --steps=-3; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=STEPS
// RUN: sh -c 'omnirun %t/toy.bin --train --steps=4 --seed=8 --checkpoint-dir=%t/ckpt --resume; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=SEED

// CHECK: iter 1/2  reward -0.00{{[0-9]+}}  loss {{.*}}  grad_norm {{.*}}  time {{.*}} s (reward {{.*}} s, compute {{.*}} s)  elapsed {{([0-9]+m)?[0-9]+s}}  eta {{([0-9]+m)?[0-9]+s}}{{$}}
// CHECK-NEXT: iter 2/2  reward {{.*}}  elapsed {{([0-9]+m)?[0-9]+s}}  eta 0s{{$}}
// CHECK-NOT: iter 3
// RESUME: resumed from {{.*}}ckpt at iteration 2
// RESUME-NEXT: iter 3/3  reward {{.*}}  eta 0s{{$}}
// NODIR: omnirun: --resume needs a folder: --resume DIR, --out DIR or --checkpoint-dir DIR
// STEPS: omnirun: --steps expects a non-negative integer, found '-3'
// SEED: omnirun: {{.*}}ckpt: the checkpoint was trained with seed 7 but --seed is 8
