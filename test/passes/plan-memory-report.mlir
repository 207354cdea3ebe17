// RUN: omni-opt %s -omni-plan-memory=report -split-input-file -o /dev/null 2>&1 | FileCheck %s

// Tests omni-plan-memory=report's account of the peak (omnic
// --report-arena, docs/fusion.md "The memory plan"): where the arena
// reaches its size, what is live there grouped by phase (the outermost
// name of each value's location) and by phase and layer (the innermost
// name), and the biggest values. Sizes: 16x16xf32 is 1024 bytes, 4x4xf32
// 64. %a (rollout) is live to the return; %b and %c die at %d, which the
// arena grows for: 1024 + 3 * 64 = 1216 bytes, all live there.
// CHECK: arena: 1216 bytes, 4 buffers, 0 reused (@by_phase)
// CHECK-NEXT: arena peak (@by_phase): 1216 bytes (0.00 MB) reached at op 3 (omni.matmul in loss / transformer_blocks.1); live there: 1216 bytes (0.00 MB) in 4 buffers
// CHECK-NEXT: most live at once (@by_phase): 1216 bytes (0.00 MB) at op 3 (omni.matmul in loss / transformer_blocks.1)
// CHECK-NEXT: phase rollout: 1024 bytes (0.00 MB) in 1 values
// CHECK-NEXT: phase loss: 192 bytes (0.00 MB) in 3 values
// CHECK-NEXT: layer rollout: 1024 bytes (0.00 MB) in 1 values
// CHECK-NEXT: layer loss / transformer_blocks.1: 128 bytes (0.00 MB) in 2 values
// CHECK-NEXT: layer loss / transformer_blocks.0: 64 bytes (0.00 MB) in 1 values
// CHECK-NEXT: value 1024 bytes (0.00 MB) tensor<16x16xf32> from omni.matmul in rollout
// CHECK-NEXT: value 64 bytes (0.00 MB) tensor<4x4xf32> from omni.matmul in loss / transformer_blocks.0
// CHECK-NEXT: value 64 bytes (0.00 MB) tensor<4x4xf32> from omni.matmul in loss / transformer_blocks.1
// CHECK-NEXT: value 64 bytes (0.00 MB) tensor<4x4xf32> from omni.matmul in loss / transformer_blocks.1
func.func @by_phase(%x: tensor<16x16xf32>, %v: tensor<4x4xf32>) -> (tensor<16x16xf32>, tensor<4x4xf32>) {
  %a = omni.matmul %x, %x : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32> loc("rollout")
  %b = omni.matmul %v, %v : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32> loc(callsite("transformer_blocks.0" at "loss"))
  %c = omni.matmul %b, %v : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32> loc(callsite("transformer_blocks.1" at "loss"))
  %d = omni.matmul %b, %c : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32> loc(callsite("transformer_blocks.1" at "loss"))
  return %a, %d : tensor<16x16xf32>, tensor<4x4xf32>
}

// -----

// Tests that fragmentation shows: %a (64 bytes at 0) dies at %c, but %c
// (128 bytes) does not fit in its hole, so the arena grows to
// 64 + 128 + 128 = 320 bytes while at most %b and %c, 256 bytes, are live;
// an op without a location has the phase (none).
// CHECK: arena: 320 bytes, 3 buffers, 0 reused (@fragmented)
// CHECK-NEXT: arena peak (@fragmented): 320 bytes (0.00 MB) reached at op 2 (omni.matmul); live there: 256 bytes (0.00 MB) in 2 buffers
// CHECK-NEXT: most live at once (@fragmented): 256 bytes (0.00 MB) at op 2 (omni.matmul)
// CHECK-NEXT: phase (none): 256 bytes (0.00 MB) in 2 values
func.func @fragmented(%x: tensor<4x4xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = omni.matmul %x, %x : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %b = omni.matmul %a, %y : tensor<4x4xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %c = omni.matmul %x, %b : tensor<4x4xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}

// -----

// Tests that a function without transients reports an empty peak.
// CHECK: arena: 0 bytes, 0 buffers, 0 reused (@empty)
// CHECK-NEXT: arena peak (@empty): empty
func.func @empty(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
