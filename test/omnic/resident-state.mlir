// Tests that omnic emits the training state as state slots: the state
// table (names, roles, types), State tensors instead of inputs and outputs,
// stores that cost nothing where the value is computed into its slot or is
// the slot's unchanged read, and Copies only where they are needed.
// RUN: omnic %s --emit=json | python3 %S/Inputs/state-summary.py | FileCheck %s
// RUN: omnic %s --emit=json | FileCheck %s --check-prefix=JSON
// RUN: omnic %s -o %t.bin && omnirun %t.bin --list | FileCheck %s --check-prefix=LIST
// RUN: sh -c 'omnic %S/Inputs/state-conflict.mlir -o %t.bad.bin; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=CONFLICT

// Slots in order of first appearance (@init_state's results come first).
// CHECK: state transformer.w Parameter F32 3
// CHECK-NEXT: state ref.transformer.w Parameter F32 3
// CHECK-NEXT: state adamw.m.w OptimizerState F32 4
// CHECK-NEXT: state adamw.step OptimizerState I64 scalar
// @init_state stores constants: one Copy per slot, no outputs.
// CHECK-NEXT: @init_state inputs=1 outputs=0 copies=[state:transformer.w state:ref.transformer.w state:adamw.m.w state:adamw.step]
// @train_step takes seed, iteration and the prompts and returns the loss:
// w, m and the step are updated in their slots, ref is returned as is.
// CHECK-NEXT: @train_step inputs=3 outputs=1 copies=[]
// A swap of two slots goes through scratch space; the old value of a slot
// returned as a plain result is copied out before the slot is overwritten.
// CHECK-NEXT: @swap inputs=0 outputs=1 copies=[result:0 arena arena state:transformer.w state:ref.transformer.w]
// CHECK-NOT: @

// JSON: "storage": "State",
// JSON: "state": [
// JSON-NEXT: {
// JSON-NEXT: "name": "transformer.w",
// JSON-NEXT: "dtype": "F32",
// JSON-NEXT: "shape": [
// JSON-NEXT: 3
// JSON-NEXT: ],
// JSON-NEXT: "role": "Parameter"

// LIST: @init_state(tensor<i64>) -> ()
// LIST: @train_step(tensor<i64>, tensor<i64>, tensor<2x3x4xf32>) -> (tensor<f32>)
// LIST: @swap() -> (tensor<3xf32>)

// CONFLICT: state-conflict.mlir:{{[0-9]+}}:1: error: @step_b: state 'w' is 'tensor<4x3xf32>' here but 'tensor<3x4xf32>' in @step_a; expected one type per state slot

func.func @init_state(%seed: tensor<i64>)
    -> (tensor<3xf32>, tensor<3xf32>, tensor<4xf32>, tensor<i64>) {
  %w = omni.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %m = omni.constant dense<0.0> : tensor<4xf32>
  %t = omni.constant dense<0> : tensor<i64>
  return %w, %w, %m, %t : tensor<3xf32>, tensor<3xf32>, tensor<4xf32>, tensor<i64>
}

func.func @train_step(%w: tensor<3xf32> {omni.name = "transformer.w"},
                      %rw: tensor<3xf32> {omni.name = "ref.transformer.w"},
                      %m: tensor<4xf32> {omni.name = "adamw.m.w"},
                      %t: tensor<i64> {omni.name = "adamw.step"},
                      %seed: tensor<i64>, %iteration: tensor<i64>,
                      %pe: tensor<2x3x4xf32> {omni.name = "prompt_embeds"})
    -> (tensor<3xf32>, tensor<3xf32>, tensor<4xf32>, tensor<i64>,
        tensor<f32> {omni.name = "loss"}) {
  %half = omni.constant dense<0.5> : tensor<3xf32>
  %wn = omni.mul %w, %half : tensor<3xf32>
  %one = omni.constant dense<1.0> : tensor<4xf32>
  %mn = omni.add %m, %one : tensor<4xf32>
  %i1 = omni.constant dense<1> : tensor<i64>
  %tn = omni.add %t, %i1 : tensor<i64>
  %s = omni.reduce sum %pe dims = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
  %r = omni.reduce sum %rw dims = [0] : tensor<3xf32> -> tensor<f32>
  %loss = omni.add %s, %r : tensor<f32>
  return %wn, %rw, %mn, %tn, %loss : tensor<3xf32>, tensor<3xf32>, tensor<4xf32>, tensor<i64>, tensor<f32>
}

func.func @swap(%a: tensor<3xf32> {omni.state = "transformer.w"},
                %b: tensor<3xf32> {omni.state = "ref.transformer.w"})
    -> (tensor<3xf32> {omni.state = "transformer.w"},
        tensor<3xf32> {omni.state = "ref.transformer.w"}, tensor<3xf32>) {
  return %b, %a, %a : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}
