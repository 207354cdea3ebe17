// RUN: omni-opt %s -omni-plan-memory -split-input-file | FileCheck %s
// RUN: omni-opt %s -omni-plan-memory=report -split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT

// Tests that a chain of library ops alternates between two buffers: each
// result takes the bytes of a value that died before it.
// CHECK-LABEL: func.func @chain_reuses
// CHECK-SAME: attributes {omni.arena_size = 128 : i64}
// CHECK: omni.matmul {{.*}} {omni.offsets = array<i64: 0>}
// CHECK-NEXT: omni.matmul {{.*}} {omni.offsets = array<i64: 64>}
// CHECK-NEXT: omni.matmul {{.*}} {omni.offsets = array<i64: 0>}
// CHECK-NEXT: omni.matmul {{.*}} {omni.offsets = array<i64: 64>}
// REPORT: arena: 128 bytes, 4 buffers, 0 reused (@chain_reuses)
func.func @chain_reuses(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = omni.matmul %x, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %b = omni.matmul %a, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %c = omni.matmul %b, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %d = omni.matmul %c, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  return %d : tensor<4x4xf32>
}

// -----

// Tests that values live at the same time get disjoint ranges, and that an
// elementwise fusion writes its result over an input that dies there
// (omni.overwrites: input #0's buffer holds result #0, the kernel is told).
// CHECK-LABEL: func.func @live_values_disjoint
// CHECK-SAME: attributes {omni.arena_size = 192 : i64}
// CHECK: omni.matmul {{.*}} {omni.offsets = array<i64: 0>}
// CHECK-NEXT: omni.matmul {{.*}} {omni.offsets = array<i64: 64>}
// CHECK-NEXT: omni.matmul {{.*}} {omni.offsets = array<i64: 128>}
// CHECK-NEXT: omni.fusion({{.*}}) {omni.offsets = array<i64: 0>, omni.overwrites = array<i64: 0, -1, -1>}
// REPORT: arena: 192 bytes, 3 buffers, 1 reused (@live_values_disjoint)
func.func @live_values_disjoint(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = omni.matmul %x, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %b = omni.matmul %w, %x : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %c = omni.matmul %x, %x : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %s = omni.fusion (%a, %b, %c) : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%p: tensor<4x4xf32>, %q: tensor<4x4xf32>, %r: tensor<4x4xf32>):
    %t = omni.add %p, %q : tensor<4x4xf32>
    %u = omni.mul %t, %r : tensor<4x4xf32>
    omni.yield %u : tensor<4x4xf32>
  }
  return %s : tensor<4x4xf32>
}

// -----

// Tests that a fusion that moves elements does not write over its input,
// even when the input dies there.
// CHECK-LABEL: func.func @negative_in_place_movement
// CHECK: omni.matmul {{.*}} {omni.offsets = array<i64: 0>}
// CHECK-NEXT: omni.fusion({{.*}}) {omni.offsets = array<i64: 64>}
func.func @negative_in_place_movement(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = omni.matmul %x, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %t = omni.fusion (%a) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%p: tensor<4x4xf32>):
    %u = omni.transpose %p, permutation = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
    omni.yield %u : tensor<4x4xf32>
  }
  return %t : tensor<4x4xf32>
}

// -----

// Tests that a result is written over an input only if nothing in the body
// reads the input after the op yielding that result: %n is read by the add
// after it, so only the add's result takes the input's bytes
// (omni.overwrites: input #0's buffer holds result #1).
// CHECK-LABEL: func.func @in_place_read_order
// CHECK: omni.matmul {{.*}} {omni.offsets = array<i64: 0>}
// CHECK-NEXT: omni.fusion({{.*}}) {omni.offsets = array<i64: 64, 0>, omni.overwrites = array<i64: 1>}
func.func @in_place_read_order(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %a = omni.matmul %x, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %f:2 = omni.fusion (%a) : (tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  ^bb0(%p: tensor<4x4xf32>):
    %n = omni.neg %p : tensor<4x4xf32>
    %s = omni.add %n, %p : tensor<4x4xf32>
    omni.yield %n, %s : tensor<4x4xf32>, tensor<4x4xf32>
  }
  return %f#0, %f#1 : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// Tests that an update of a donated argument returned by the function is
// written into the argument's buffer (an SGD step), while the result
// computed from an argument that is not donated goes to the arena.
// CHECK-LABEL: func.func @donation
// CHECK-SAME: attributes {omni.arena_size = 64 : i64}
// CHECK: omni.fusion({{.*}}) {omni.donated_args = array<i64: 0, -1>, omni.offsets = array<i64: -1, 0>, omni.overwrites = array<i64: 0, -1, -1>}
// REPORT: arena: 64 bytes, 1 buffers, 1 reused (@donation)
func.func @donation(%p: tensor<16xf32> {omni.donate}, %g: tensor<16xf32>, %q: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %f:2 = omni.fusion (%p, %g, %q) : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  ^bb0(%a: tensor<16xf32>, %b: tensor<16xf32>, %c: tensor<16xf32>):
    %lr = omni.constant dense<0.1> : tensor<16xf32>
    %s = omni.mul %b, %lr : tensor<16xf32>
    %n = omni.sub %a, %s : tensor<16xf32>
    %m = omni.sub %c, %s : tensor<16xf32>
    omni.yield %n, %m : tensor<16xf32>, tensor<16xf32>
  }
  return %f#0, %f#1 : tensor<16xf32>, tensor<16xf32>
}

// -----

// Tests that a donated argument is overwritten only at its last read: the
// first fusion reads it before the second does.
// CHECK-LABEL: func.func @donation_at_last_read
// CHECK: omni.fusion({{.*}}) {omni.offsets = array<i64: 0>}
// CHECK: omni.fusion({{.*}}) {omni.donated_args = array<i64: 0>, omni.offsets = array<i64: -1>, omni.overwrites = array<i64: 0>}
func.func @donation_at_last_read(%p: tensor<16xf32> {omni.donate}, %g: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %n = omni.fusion (%p, %g) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%a: tensor<16xf32>, %b: tensor<16xf32>):
    %s = omni.sub %a, %b : tensor<16xf32>
    omni.yield %s : tensor<16xf32>
  }
  %m = omni.fusion (%p) : (tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%a: tensor<16xf32>):
    %s = omni.exp %a : tensor<16xf32>
    omni.yield %s : tensor<16xf32>
  }
  return %n, %m : tensor<16xf32>, tensor<16xf32>
}

// -----

// Tests that a loop keeps its carried value in one slot (the init's buffer,
// which dies at the loop), that the value yielded back is computed in that
// slot, that a value defined before the loop and read inside stays live for
// the whole loop (%a's bytes are not reused inside), and that the loop
// result lives in the slot.
// CHECK-LABEL: func.func @loop_carried
// CHECK-SAME: attributes {omni.arena_size = 192 : i64}
// CHECK: %[[A:.*]] = omni.matmul {{.*}} {omni.offsets = array<i64: 0>}
// CHECK-NEXT: %[[INIT:.*]] = omni.matmul {{.*}} {omni.offsets = array<i64: 64>}
// CHECK-NEXT: scf.for
// CHECK-NEXT: omni.matmul {{.*}} {omni.offsets = array<i64: 128>}
// CHECK-NEXT: omni.fusion({{.*}}) {omni.offsets = array<i64: 64>, omni.overwrites = array<i64: -1, 0>}
// CHECK: } {omni.offsets = array<i64: 64>}
// CHECK-NEXT: omni.fusion({{.*}}) {omni.offsets = array<i64: 64>, omni.overwrites = array<i64: 0>}
// REPORT: arena: 192 bytes, 3 buffers, 3 reused (@loop_carried)
func.func @loop_carried(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %a = omni.matmul %x, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %init = omni.matmul %w, %x : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%acc = %init) -> (tensor<4x4xf32>) {
    %t = omni.matmul %acc, %a : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
    %n = omni.fusion (%t, %acc) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> {
    ^bb0(%p: tensor<4x4xf32>, %q: tensor<4x4xf32>):
      %s = omni.add %p, %q : tensor<4x4xf32>
      omni.yield %s : tensor<4x4xf32>
    }
    scf.yield %n : tensor<4x4xf32>
  }
  %y = omni.fusion (%r) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%p: tensor<4x4xf32>):
    %s = omni.tanh %p : tensor<4x4xf32>
    omni.yield %s : tensor<4x4xf32>
  }
  return %y : tensor<4x4xf32>
}

// -----

// Tests that a slot carried by a loop is updated in place by
// tensor.insert_slice (its destination), and that the init's buffer
// becomes the slot.
// CHECK-LABEL: func.func @insert_slice_in_loop
// CHECK: omni.fusion({{.*}}) {omni.offsets = array<i64: 0>}
// CHECK: scf.for
// CHECK: omni.fusion({{.*}}) {omni.offsets = array<i64: 128>}
// CHECK: tensor.insert_slice {{.*}} {omni.offsets = array<i64: 0>}
// CHECK: } {omni.offsets = array<i64: 0>}
func.func @insert_slice_in_loop(%x: tensor<1x8xf32>, %init: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %z = omni.fusion (%init) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%p: tensor<4x8xf32>):
    %s = omni.neg %p : tensor<4x8xf32>
    omni.yield %s : tensor<4x8xf32>
  }
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %z) -> (tensor<4x8xf32>) {
    %e = omni.fusion (%x) : (tensor<1x8xf32>) -> tensor<1x8xf32> {
    ^bb0(%p: tensor<1x8xf32>):
      %s = omni.exp %p : tensor<1x8xf32>
      omni.yield %s : tensor<1x8xf32>
    }
    %n = tensor.insert_slice %e into %acc[%i, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<4x8xf32>
    scf.yield %n : tensor<4x8xf32>
  }
  return %r : tensor<4x8xf32>
}

// -----

// Tests that a reshape allocates nothing and keeps its operand's buffer
// live as long as the reshape is read.
// CHECK-LABEL: func.func @reshape_aliases
// CHECK: omni.matmul {{.*}} {omni.offsets = array<i64: 0>}
// CHECK-NEXT: omni.reshape
// CHECK-NOT: omni.offsets
// CHECK-SAME: -> tensor<16xf32>
// CHECK-NEXT: omni.matmul {{.*}} {omni.offsets = array<i64: 64>}
// CHECK-NEXT: omni.reshape
// CHECK-NEXT: omni.fusion({{.*}}) {omni.offsets = array<i64: 0>, omni.overwrites = array<i64: 0, -1>}
func.func @reshape_aliases(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<16xf32> {
  %a = omni.matmul %x, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %v = omni.reshape %a : tensor<4x4xf32> -> tensor<16xf32>
  %b = omni.matmul %x, %x : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %bv = omni.reshape %b : tensor<4x4xf32> -> tensor<16xf32>
  %s = omni.fusion (%v, %bv) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%p: tensor<16xf32>, %q: tensor<16xf32>):
    %u = omni.add %p, %q : tensor<16xf32>
    omni.yield %u : tensor<16xf32>
  }
  return %s : tensor<16xf32>
}

// -----

// Tests that constants, arguments and random numbers are handled as the
// backend stores them: constants and arguments are not in the arena, random
// numbers and host calls are.
// CHECK-LABEL: func.func @non_arena_values
// CHECK-SAME: attributes {omni.arena_size = 128 : i64}
// CHECK: omni.constant
// CHECK-NOT: omni.offsets
// CHECK-SAME: tensor<i64>
// CHECK-NEXT: omni.random_normal {{.*}} {omni.offsets = array<i64: 0>}
// CHECK-NEXT: omni.host_call {{.*}} {omni.offsets = array<i64: 64>}
func.func @non_arena_values(%x: tensor<4xf32>) -> tensor<4xf32> {
  %k = omni.constant dense<3> : tensor<i64>
  %e = omni.random_normal %k, %k, %k : tensor<4xf32>
  %h = omni.host_call "brightness"(%e) : (tensor<4xf32>) -> tensor<4xf32>
  return %h : tensor<4xf32>
}
