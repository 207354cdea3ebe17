// Tests that every hand-written example compiles and loads.
// RUN: omnic %omni_src_root/examples/flowgrpo-step.mlir -o %t.step.bin
// RUN: omnirun %t.step.bin --list | FileCheck %s --check-prefix=STEP
// RUN: omnic %omni_src_root/examples/flowgrpo-toy/toy.mlir -o %t.toy.bin
// RUN: omnirun %t.toy.bin --list | FileCheck %s --check-prefix=TOY

// STEP: @step(tensor<48x48xf32>, tensor<4x48xf32>, tensor<i64>, tensor<i64>, tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>)
// TOY-DAG: @rollout(
// TOY-DAG: @loss(
// TOY-DAG: @train_step(
// TOY-DAG: @init_state(tensor<i64>)
