// RUN: omni-opt %s -omni-shard -split-input-file -verify-diagnostics

// Tests that only state is split at a function's boundary.
omni.mesh @mesh axes = ["dp"] shape = [2]
// expected-error@+1 {{argument 0 has omni.sharding but is not state (omni.state): only state is split at a function's boundary; split data with omni.shard in the body}}
func.func @data(%x: tensor<4xf32> {omni.sharding = #omni.sharding<@mesh, [["dp"]]>}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// Tests that one dimension at most is split.
omni.mesh @mesh axes = ["dp", "fsdp"] shape = [2, 2]
// expected-error@+1 {{argument 0 splits more than one dimension; omni-shard splits at most one dimension of a tensor}}
func.func @two(%w: tensor<4x4xf32> {omni.state = "w", omni.sharding = #omni.sharding<@mesh, [["dp"], ["fsdp"]]>}) -> tensor<4x4xf32> {
  return %w : tensor<4x4xf32>
}

// -----

// Tests that a 0-D state cannot be split.
omni.mesh @mesh axes = ["dp"] shape = [2]
// expected-error@+1 {{argument 0 is a 0-D tensor and cannot be split}}
func.func @scalar(%s: tensor<f32> {omni.state = "s", omni.sharding = #omni.sharding<@mesh, []>}) -> tensor<f32> {
  return %s : tensor<f32>
}

// -----

// Tests that a sharding names the module's mesh axes.
omni.mesh @mesh axes = ["dp"] shape = [2]
// expected-error@+1 {{argument 0's sharding names axis "tp" that mesh @mesh does not have}}
func.func @axis(%w: tensor<4xf32> {omni.state = "w", omni.sharding = #omni.sharding<@mesh, [["tp"]]>}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}

// -----

// Tests that a sharding has one entry per dimension.
omni.mesh @mesh axes = ["dp"] shape = [2]
// expected-error@+1 {{argument 0's sharding has 1 entries but the tensor has rank 2}}
func.func @entries(%w: tensor<4x4xf32> {omni.state = "w", omni.sharding = #omni.sharding<@mesh, [["dp"]]>}) -> tensor<4x4xf32> {
  return %w : tensor<4x4xf32>
}

// -----

// Tests that a state slot has one layout on entry and on return.
omni.mesh @mesh axes = ["dp"] shape = [2]
// expected-error@+1 {{state 'w' is split differently as argument 0 and as result 0; a state slot has one layout}}
func.func @layout(%w: tensor<4x4xf32> {omni.state = "w", omni.sharding = #omni.sharding<@mesh, [["dp"], []]>})
    -> (tensor<4x4xf32> {omni.state = "w", omni.sharding = #omni.sharding<@mesh, [[], ["dp"]]>}) {
  return %w : tensor<4x4xf32>
}

// -----

// Tests that an annotation splits one dimension.
omni.mesh @mesh axes = ["dp", "fsdp"] shape = [2, 2]
func.func @shard2(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error@+1 {{splits more than one dimension; omni-shard splits at most one dimension of a tensor}}
  %s = omni.shard %x : tensor<4x4xf32> to #omni.sharding<@mesh, [["dp"], ["fsdp"]]>
  return %s : tensor<4x4xf32>
}

// -----

// Tests that a program has one mesh.
omni.mesh @a axes = ["dp"] shape = [2]
// expected-error@+1 {{is a second mesh; omni-shard supports one mesh per program}}
omni.mesh @b axes = ["dp"] shape = [2]

// -----

// Tests that an annotation needs a mesh.
func.func @nomesh(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'omni.shard' op mesh @mesh is not an omni.mesh}}
  %s = omni.shard %x : tensor<4xf32> to #omni.sharding<@mesh, [["dp"]]>
  return %s : tensor<4xf32>
}

// -----

// Tests the gather mode's values.
// expected-error@+1 {{omni.shard_gather is "sometimes" but must be "once" or "per-step"}}
module attributes {omni.shard_gather = "sometimes"} {
  omni.mesh @mesh axes = ["dp"] shape = [2]
}

// -----

// Tests that calls are inlined first.
omni.mesh @mesh axes = ["dp"] shape = [2]
func.func private @f(%x: tensor<4xf32>) -> tensor<4xf32>
func.func @caller(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{is left in the program; omni-shard runs on inlined programs (after the cleanup stage)}}
  %y = func.call @f(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that a sharding names the module's mesh.
omni.mesh @mesh axes = ["dp"] shape = [2]
// expected-error@+1 {{argument 0's sharding names mesh @other but the module's mesh is @mesh}}
func.func @othermesh(%w: tensor<4xf32> {omni.state = "w", omni.sharding = #omni.sharding<@other, [["dp"]]>}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}
