// RUN: omni-opt %s -omni-plan-memory -split-input-file | FileCheck %s

// Tests that a state argument's slot takes the update stored back into the
// same slot (an SGD step computed straight into the parameter's slot),
// while a plain result computed from it goes to the arena.
// CHECK-LABEL: func.func @into_own_slot
// CHECK-SAME: attributes {omni.arena_size = 64 : i64}
// CHECK: omni.fusion({{.*}}) {omni.donated_args = array<i64: 0, -1>, omni.offsets = array<i64: -1, 0>, omni.overwrites = array<i64: 0, -1>}
func.func @into_own_slot(%p: tensor<16xf32> {omni.state = "p"}, %g: tensor<16xf32>)
    -> (tensor<16xf32> {omni.state = "p"}, tensor<16xf32>) {
  %f:2 = omni.fusion (%p, %g) : (tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  ^bb0(%a: tensor<16xf32>, %b: tensor<16xf32>):
    %lr = omni.constant dense<0.1> : tensor<16xf32>
    %s = omni.mul %b, %lr : tensor<16xf32>
    %n = omni.sub %a, %s : tensor<16xf32>
    omni.yield %n, %s : tensor<16xf32>, tensor<16xf32>
  }
  return %f#0, %f#1 : tensor<16xf32>, tensor<16xf32>
}

// -----

// Tests that a slot is given only to the value stored back into it: the
// fusion's first result (-x) is stored into y, so x's slot, which it could
// overwrite in place, is refused to it and goes to the second result (-y),
// stored into x; y's slot cannot take -x (y is still read after -x is
// computed); z's update is a plain result, so z's slot is not taken.
// CHECK-LABEL: func.func @negative_other_slot
// CHECK: omni.fusion({{.*}}) {omni.donated_args = array<i64: -1, 0, -1>, omni.offsets = array<i64: 0, -1, 64>, omni.overwrites = array<i64: 1, -1, -1>}
func.func @negative_other_slot(%x: tensor<16xf32> {omni.state = "x"},
                               %y: tensor<16xf32> {omni.state = "y"},
                               %z: tensor<16xf32> {omni.state = "z"})
    -> (tensor<16xf32> {omni.state = "x"}, tensor<16xf32> {omni.state = "y"},
        tensor<16xf32>) {
  %f:3 = omni.fusion (%x, %y, %z) : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  ^bb0(%a: tensor<16xf32>, %b: tensor<16xf32>, %c: tensor<16xf32>):
    %na = omni.neg %a : tensor<16xf32>
    %nb = omni.neg %b : tensor<16xf32>
    %nc = omni.neg %c : tensor<16xf32>
    omni.yield %na, %nb, %nc : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
  }
  return %f#1, %f#0, %f#2 : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// Tests that a slot read again after the update (by a later op) keeps its
// old value until then: the update goes to the arena.
// CHECK-LABEL: func.func @negative_read_after_update
// CHECK: omni.fusion({{.*}}) {omni.offsets = array<i64: 0>}
// CHECK: omni.fusion({{.*}}) {omni.offsets = array<i64: 64>}
// CHECK-NOT: omni.donated_args
func.func @negative_read_after_update(%p: tensor<16xf32> {omni.state = "p"})
    -> (tensor<16xf32> {omni.state = "p"}, tensor<16xf32>) {
  %n = omni.fusion (%p) : (tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%a: tensor<16xf32>):
    %e = omni.exp %a : tensor<16xf32>
    omni.yield %e : tensor<16xf32>
  }
  %m = omni.fusion (%p) : (tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%a: tensor<16xf32>):
    %e = omni.neg %a : tensor<16xf32>
    omni.yield %e : tensor<16xf32>
  }
  return %n, %m : tensor<16xf32>, tensor<16xf32>
}

// -----

// Tests that a state slot is preferred to a dead transient of the same size
// that comes first among the inputs (an optimizer step whose gradient is
// computed in the function): the update goes into the parameter's slot, so
// nothing is copied into the slot at the return; the gradient's buffer is
// released instead of taken.
// CHECK-LABEL: func.func @slot_before_dead_transient
// CHECK: omni.fusion({{.*}}) {omni.offsets = array<i64: 0>}
// CHECK: omni.fusion({{.*}}) {omni.donated_args = array<i64: 0>, omni.offsets = array<i64: -1>, omni.overwrites = array<i64: -1, 0>}
func.func @slot_before_dead_transient(%p: tensor<16xf32> {omni.state = "p"},
                                      %x: tensor<16xf32>)
    -> (tensor<16xf32> {omni.state = "p"}) {
  %g = omni.fusion (%x) : (tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%a: tensor<16xf32>):
    %e = omni.exp %a : tensor<16xf32>
    omni.yield %e : tensor<16xf32>
  }
  %n = omni.fusion (%g, %p) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%a: tensor<16xf32>, %b: tensor<16xf32>):
    %lr = omni.constant dense<0.1> : tensor<16xf32>
    %s = omni.mul %a, %lr : tensor<16xf32>
    %u = omni.sub %b, %s : tensor<16xf32>
    omni.yield %u : tensor<16xf32>
  }
  return %n : tensor<16xf32>
}
