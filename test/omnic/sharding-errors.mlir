// Tests omnic's errors for sharded state the step.bin writer cannot
// describe (step.fbs StateSharding): one line at the function, exit code
// 1, never a crash.
// RUN: sh -c 'omnic %S/Inputs/shard-two-dims.mlir -o %t.bin; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: sh -c 'omnic %S/Inputs/shard-unknown-mesh.mlir -o %t.bin; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=MESH
// RUN: sh -c 'omnic %S/Inputs/shard-unknown-axis.mlir -o %t.bin; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=AXIS
// RUN: sh -c 'omnic %S/Inputs/shard-wrong-rows.mlir -o %t.bin; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=ROWS
// RUN: sh -c 'omnic %S/Inputs/shard-other-dim.mlir -o %t.bin; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=OTHER
// A sharding without omni.global_type is a program omni-shard splits
// (the writer's error for it is for IR that skips the pass).
// RUN: omnic %S/Inputs/shard-no-global.mlir -o %t.ng.bin
// RUN: omnirun %t.ng.bin --list | FileCheck %s --check-prefix=NOGLOBAL
// RUN: sh -c 'omnic %S/Inputs/shard-entries.mlir -o %t.bin; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=ENTRIES
// RUN: sh -c 'omnic %S/Inputs/shard-input.mlir -o %t.bin; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=INPUT
// RUN: sh -c 'omnic %S/Inputs/shard-conflict.mlir -o %t.bin; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=CONFLICT

// TWO: shard-two-dims.mlir:3:1: error: @step: state 'w' has omni.sharding #omni.sharding<@mesh, {{\[\["fsdp"\], \["dp"\]\]}}> that splits dimensions 0 and 1; expected at most one split dimension
// TWO-NOT: error
// MESH: shard-unknown-mesh.mlir:3:1: error: @step: state 'w' has omni.sharding over @grid but the module has no omni.mesh of that name
// AXIS: shard-unknown-axis.mlir:3:1: error: @step: state 'w' has omni.sharding {{.*}} over axis 'tp' but mesh @mesh has no such axis
// ROWS: shard-wrong-rows.mlir:3:1: error: @step: state 'w' is 'tensor<3x4xf32>' but omni.global_type 'tensor<4x4xf32>' split along dimension 0 over 2 ranks gives 'tensor<2x4xf32>'; expected the local type to be ceil(global / ranks) on the split dimension and equal elsewhere
// OTHER: shard-other-dim.mlir:3:1: error: @step: state 'w' is 'tensor<2x4xf32>' but omni.global_type 'tensor<4x8xf32>' split along dimension 0 over 2 ranks gives 'tensor<2x8xf32>'; expected
// NOGLOBAL: state 'w': tensor<1x4xf32> (Parameter, shard 1/2 of tensor<2x4xf32> dim 0 over 'fsdp')
// ENTRIES: shard-entries.mlir:3:1: error: @step: state 'w' of type 'tensor<2x4xf32>' has omni.sharding {{.*}} with 1 entries; expected one per dimension (2)
// INPUT: shard-input.mlir:3:1: error: 'func.func' op argument 0 has omni.sharding but is not state (omni.state): only state is split at a function's boundary; split data with omni.shard in the body
// CONFLICT: shard-conflict.mlir:7:1: error: @b: state 'w' is sharded differently here than in an earlier use; expected one sharding per state slot
