// Tests omnirun --function with resident state: --state-out saves every
// state slot after the run, --state-in sets slots before it, so a function
// that updates its state in place can be stepped from the outside (the
// parity scripts under bench/torch do this), and the errors.
// RUN: omnic %s -o %t.bin
// RUN: omnirun %t.bin --function=init_state --input=i64=0 --state-out=%t.s0.safetensors | FileCheck %s --check-prefix=INIT --allow-empty
// RUN: omnirun %t.bin --function=step --input=3xf32=1,1,1 --state-in=%t.s0.safetensors --state-out=%t.s1.safetensors | FileCheck %s --check-prefix=STEP1
// RUN: omnirun %t.bin --function=step --input=3xf32=1,1,1 --state-in=%t.s1.safetensors | FileCheck %s --check-prefix=STEP2
// Without --state-in the slot holds zeros (the executor zero-fills it).
// RUN: omnirun %t.bin --function=step --input=3xf32=1,1,1 | FileCheck %s --check-prefix=ZERO
// RUN: sh -c 'omnirun %t.bin --steps=1 --state-out=%t.x.safetensors; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=TRAIN
// RUN: sh -c 'omnirun %t.bin --function=step --input=3xf32=1,1,1 --state-in=%t.missing.safetensors; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: sh -c 'omnirun %t.bin --function=step --input=3xf32=1,1,1 --state-in=%S/Inputs/other-state.safetensors; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=OTHER

// INIT-NOT: result
// The step returns the slot's old value and stores old + x into it.
// STEP1: result[0]: tensor<3xf32>=[1 2 3]
// STEP2: result[0]: tensor<3xf32>=[2 3 4]
// ZERO: result[0]: tensor<3xf32>=[0 0 0]
// TRAIN: omnirun: --state-out goes with --function
// MISSING: omnirun: {{.*}}missing.safetensors{{.*}}
// OTHER: omnirun: --state-in {{.*}}other-state.safetensors: {{.*}}

func.func @init_state(%seed: tensor<i64>) -> (tensor<3xf32> {omni.state = "w"}) {
  %w = omni.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  return %w : tensor<3xf32>
}

func.func @step(%w: tensor<3xf32> {omni.state = "w"}, %x: tensor<3xf32>)
    -> (tensor<3xf32> {omni.state = "w"}, tensor<3xf32>) {
  %n = omni.add %w, %x : tensor<3xf32>
  return %n, %w : tensor<3xf32>, tensor<3xf32>
}
