// RUN: omni-opt %s -omni-plan-memory -split-input-file -verify-diagnostics

// Tests that a tensor whose size is not known at compile time is reported:
// the arena is sized statically.
func.func @dynamic_shape(%n: index) -> tensor<?xf32> {
  // expected-error@+1 {{omni-plan-memory needs statically shaped tensors of integers or floats, found 'tensor<?xf32>'}}
  %t = tensor.empty(%n) : tensor<?xf32>
  return %t : tensor<?xf32>
}
