// Malformed user inputs: each gives an error at file:line:col and omni-opt
// exits with status 1. `not` alone would also accept other non-zero statuses,
// so the `sh -c` lines pin the status to exactly 1 (a crash exits with 128+
// the signal number).
//
// RUN: not omni-opt %s -split-input-file 2>&1 | FileCheck %s
// RUN: sh -c 'omni-opt %s -split-input-file >/dev/null 2>&1; test $? -eq 1'
// RUN: not omni-opt %S/Inputs/truncated.mlir 2>&1 | FileCheck %s --check-prefix=TRUNC-OP
// RUN: sh -c 'omni-opt %S/Inputs/truncated.mlir >/dev/null 2>&1; test $? -eq 1'
// RUN: not omni-opt %S/Inputs/truncated-region.mlir 2>&1 | FileCheck %s --check-prefix=TRUNC-REGION
// RUN: sh -c 'omni-opt %S/Inputs/truncated-region.mlir >/dev/null 2>&1; test $? -eq 1'

// Tests that a file ending in the middle of an op is reported where it ends.
// TRUNC-OP: {{.*}}truncated.mlir:3:{{[0-9]+}}: error: expected 'x' in dimension list

// Tests that a file ending inside a function body is reported where it ends.
// TRUNC-REGION: {{.*}}truncated-region.mlir:3:{{[0-9]+}}: error: expected operation name in quotes

// Tests that an operand of the wrong rank is reported at the op.
func.func @wrong_rank(%a: tensor<3xf32>, %b: tensor<3x4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}malformed.mlir:[[@LINE+1]]:{{[0-9]+}}: error: 'omni.matmul' op operands must have rank >= 2, found 1 and 2
  %0 = omni.matmul %a, %b : tensor<3xf32>, tensor<3x4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that 2-D rewards are reported at the op.
func.func @wrong_rank_rewards(%r: tensor<2x2xf32>) -> tensor<2x2xf32> {
  // CHECK: {{.*}}malformed.mlir:[[@LINE+1]]:{{[0-9]+}}: error: 'omni.group_advantages' op rewards must be 1-D with a multiple of group_size (2) entries, found 'tensor<2x2xf32>'
  %0 = omni.group_advantages %r {group_size = 2} : tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

// Tests that operands of different element types are reported at the op.
func.func @mismatched_element_types(%x: tensor<4xf32>, %y: tensor<4xf16>) -> tensor<4xf32> {
  // CHECK: {{.*}}malformed.mlir:[[@LINE+1]]:{{[0-9]+}}: error: 'omni.add' op requires the same type for all operands and results
  %0 = "omni.add"(%x, %y) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that matmul operands of different element types are reported at
// the op.
func.func @mismatched_matmul_types(%a: tensor<2x3xf32>, %b: tensor<3x4xbf16>) -> tensor<2x4xf32> {
  // CHECK: {{.*}}malformed.mlir:[[@LINE+1]]:{{[0-9]+}}: error: 'omni.matmul' op element types differ: 'f32' and 'bf16'
  %0 = omni.matmul %a, %b : tensor<2x3xf32>, tensor<3x4xbf16> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that an unknown sde type keyword is reported at the keyword.
func.func @unknown_sde_type(%x: tensor<4x16xf32>, %s: tensor<11xf32>, %i: index) {
  // CHECK: {{.*}}malformed.mlir:[[@LINE+1]]:{{[0-9]+}}: error: custom op 'omni.sde_step' unknown sde_type 'bogus'
  %n, %lp, %m, %std = omni.sde_step bogus %x, %x, %s[%i] noise %x : tensor<4x16xf32>, tensor<11xf32>
  return
}

// -----

// Tests that an unknown enum case in the generic attribute form is reported
// with the valid cases.
func.func @unknown_enum_generic(%x: tensor<2x3xf32>) -> tensor<2xf32> {
  // CHECK: {{.*}}malformed.mlir:[[@LINE+1]]:{{[0-9]+}}: error: expected ::mlir::omni::ReduceKind to be one of: sum, max, min, mean
  %0 = "omni.reduce"(%x) <{kind = #omni.reduce_kind<median>, dims = array<i64: 1>}> : (tensor<2x3xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Tests that an enum property given as a plain integer is reported.
func.func @enum_as_integer(%x: tensor<2x3xf32>) -> tensor<2xf32> {
  // CHECK: {{.*}}malformed.mlir:[[@LINE+1]]:{{[0-9]+}}: error: invalid properties {dims = array<i64: 1>, kind = 7 : i32} for op omni.reduce
  %0 = "omni.reduce"(%x) <{kind = 7 : i32, dims = array<i64: 1>}> : (tensor<2x3xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Tests that a negative noise level is reported at the op.
func.func @negative_noise_level(%x: tensor<4x16xf32>, %s: tensor<11xf32>, %i: index) {
  // CHECK: {{.*}}malformed.mlir:[[@LINE+1]]:{{[0-9]+}}: error: 'omni.sde_step' op noise_level must be >= 0, found -7.000000e-01
  %n, %lp, %m, %std = omni.sde_step sde %x, %x, %s[%i] noise %x {noise_level = -0.7} : tensor<4x16xf32>, tensor<11xf32>
  return
}

// -----

// Tests that group_size = 0 is reported at the op.
func.func @group_size_zero(%r: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}malformed.mlir:[[@LINE+1]]:{{[0-9]+}}: error: 'omni.group_advantages' op group_size must be >= 1, found 0
  %0 = omni.group_advantages %r {group_size = 0} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that ddof = 2 is reported at the op.
func.func @ddof_two(%r: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}malformed.mlir:[[@LINE+1]]:{{[0-9]+}}: error: 'omni.group_advantages' op ddof must be 0 or 1, found 2
  %0 = omni.group_advantages %r {group_size = 2, ddof = 2} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that an attribute of the wrong kind (a float group size) is
// reported at the attribute dictionary.
func.func @group_size_float(%r: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}malformed.mlir:[[@LINE+1]]:{{[0-9]+}}: error: {{.*}}attribute 'group_size' failed to satisfy constraint: 64-bit signless integer attribute
  %0 = omni.group_advantages %r {group_size = 2.5} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a sharding attribute without its dimension list is reported.
func.func @sharding_truncated(%x: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK: {{.*}}malformed.mlir:[[@LINE+1]]:{{[0-9]+}}: error: expected ','
  %0 = "omni.shard"(%x) <{sharding = #omni.sharding<@mesh>}> : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that an unknown omni op is reported at its name.
func.func @unknown_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}malformed.mlir:[[@LINE+1]]:{{[0-9]+}}: error: custom op 'omni.frobnicate' is unknown
  %0 = omni.frobnicate %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a use of an undefined value is reported at the use.
func.func @undefined_value() -> tensor<4xf32> {
  // CHECK: {{.*}}malformed.mlir:[[@LINE+1]]:{{[0-9]+}}: error: use of undeclared SSA value name
  %0 = omni.exp %missing : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that garbage text is reported where it starts.
// CHECK: {{.*}}malformed.mlir:[[@LINE+1]]:1: error: custom op 'this' is unknown
this is %% not @@ mlir ((
