// RUN: omni-opt %s -omni-resident-state -split-input-file -verify-diagnostics

// Tests that a state slot has one tensor type in the whole module: two
// steps that name their state alike but disagree on its shape.
func.func @step_a(%w: tensor<12x4xf32> {omni.name = "ref.w"},
                  %seed: tensor<i64>, %iteration: tensor<i64>)
    -> tensor<12x4xf32> {
  return %w : tensor<12x4xf32>
}
// expected-error@+1 {{@step_b: state 'ref.w' is 'tensor<4x12xf32>' here but 'tensor<12x4xf32>' in @step_a; expected one type per state slot}}
func.func @step_b(%w: tensor<4x12xf32> {omni.name = "ref.w"},
                  %seed: tensor<i64>, %iteration: tensor<i64>)
    -> tensor<4x12xf32> {
  return %w : tensor<4x12xf32>
}

// -----

// Tests that one function reads a slot at most once.
// expected-error@+1 {{@twice: arguments #0 and #1 are both state 'w'; expected each slot at most once}}
func.func @twice(%a: tensor<4xf32> {omni.name = "w"},
                 %b: tensor<4xf32> {omni.name = "w"},
                 %seed: tensor<i64>, %iteration: tensor<i64>)
    -> (tensor<4xf32>, tensor<4xf32>) {
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that one function stores a slot at most once (explicit attributes
// are checked like inferred ones).
// expected-error@+1 {{@stores_twice: results #0 and #1 are both state 'w'; expected each slot at most once}}
func.func @stores_twice(%a: tensor<4xf32>)
    -> (tensor<4xf32> {omni.state = "w"}, tensor<4xf32> {omni.state = "w"}) {
  return %a, %a : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that an initializer matching the state of two steps that name it
// differently is refused instead of guessed.
func.func @step_a(%w: tensor<4xf32> {omni.name = "a"},
                  %seed: tensor<i64>, %iteration: tensor<i64>) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}
func.func @step_b(%w: tensor<4xf32> {omni.name = "b"},
                  %seed: tensor<i64>, %iteration: tensor<i64>) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}
// expected-error@+1 {{@init: its results match the state of @step_a and of @step_b, which name it differently; expected omni.state (or omni.name) attributes on its results}}
func.func @init(%seed: tensor<i64>) -> tensor<4xf32> {
  %w = omni.constant dense<1.0> : tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

// Tests that omni.state must be a non-empty string.
// expected-error@+1 {{@bad_name: argument #0 has omni.state = 3 : i64; expected a non-empty state slot name}}
func.func @bad_name(%w: tensor<4xf32> {omni.state = 3}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}

// -----

// expected-error@+1 {{@empty_name: result #0 has omni.state = ""; expected a non-empty state slot name}}
func.func @empty_name(%w: tensor<4xf32>) -> (tensor<4xf32> {omni.state = ""}) {
  return %w : tensor<4xf32>
}

// -----

// Tests that a state slot has a static shape (its buffer lives across
// calls).
// expected-error@+1 {{@dynamic: argument #0 is state 'w' of type 'tensor<?xf32>'; expected a statically shaped tensor}}
func.func @dynamic(%w: tensor<?xf32> {omni.state = "w"}) -> tensor<?xf32> {
  return %w : tensor<?xf32>
}
