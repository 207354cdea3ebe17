// RUN: omni-opt %s -split-input-file -verify-diagnostics

// Negative tests of the omni dialect: one split per verifier constraint
// (labelled as in the op descriptions of OmniOps.td) and a few failures of
// the ODS type constraints. Shape errors of ops with inferred result types
// come with a second "failed to infer returned types" error when the result
// type is spelled and checked by the verifier; when the custom form infers
// the result type while parsing, the shape error is the only one.

//===----------------------------------------------------------------------===//
// ODS type constraints
//===----------------------------------------------------------------------===//

// Tests that exp rejects an integer operand (Omni_FloatTensor).
func.func @exp_i32(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'omni.exp' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi32>'}}
  %0 = omni.exp %x : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// Tests that add rejects a dynamically shaped tensor (StaticShapeTensorOf).
func.func @add_dynamic(%x: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{'omni.add' op operand #0 must be statically shaped tensor}}
  %0 = omni.add %x, %x : tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// Tests that a binary op rejects operands of different types
// (SameOperandsAndResultType).
func.func @add_mismatched(%x: tensor<4xf32>, %y: tensor<4xf16>) -> tensor<4xf32> {
  // expected-error @+1 {{'omni.add' op requires the same type for all operands and results}}
  %0 = "omni.add"(%x, %y) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that and rejects float operands (Omni_PredTensor).
func.func @and_float(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'omni.and' op operand #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = omni.and %x, %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that is_finite rejects an unranked operand (Omni_FloatTensor).
func.func @is_finite_unranked(%x: tensor<*xf32>) -> tensor<*xi1> {
  // expected-error @+1 {{'omni.is_finite' op operand #0 must be statically shaped tensor}}
  %0 = "omni.is_finite"(%x) : (tensor<*xf32>) -> tensor<*xi1>
  return %0 : tensor<*xi1>
}

// -----

// Tests that compare rejects operands of different types (SameTypeOperands).
func.func @compare_mismatched(%x: tensor<4xf32>, %y: tensor<4xf64>) -> tensor<4xi1> {
  // expected-error @+1 {{'omni.compare' op requires all operands to have the same type}}
  %0 = "omni.compare"(%x, %y) <{direction = #omni.compare_direction<lt>}> : (tensor<4xf32>, tensor<4xf64>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// Tests that the diffusion RL ops reject bf16 (Omni_RLTensor: f32 or f64).
func.func @group_advantages_bf16(%r: tensor<4xbf16>) -> tensor<4xbf16> {
  // expected-error @+1 {{'omni.group_advantages' op operand #0 must be statically shaped tensor of 32-bit float or 64-bit float values, but got 'tensor<4xbf16>'}}
  %0 = omni.group_advantages %r {group_size = 2} : tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// Tests that the random ops need i64 scalars for key, counter and offset
// (Omni_I64Scalar).
func.func @random_key_i32(%k: tensor<i32>, %c: tensor<i64>) -> tensor<4xf32> {
  // expected-error @+1 {{'omni.random_normal' op operand #0 must be 0D tensor of 64-bit signless integer values, but got 'tensor<i32>'}}
  %0 = "omni.random_normal"(%k, %c, %c) : (tensor<i32>, tensor<i64>, tensor<i64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a compare direction outside the enum is rejected
// (CompareDirection).
func.func @compare_bad_direction(%x: tensor<4xf32>) -> tensor<4xi1> {
  // expected-error @+1 {{unknown compare_direction 'lte'}}
  %0 = omni.compare lte, %x, %x : tensor<4xf32>
  return %0 : tensor<4xi1>
}

// -----

// Tests that yield must sit in a fusion region (HasParent).
func.func @yield_outside_fusion(%x: tensor<4xf32>) {
  // expected-error @+1 {{'omni.yield' op expects parent op 'omni.fusion'}}
  omni.yield %x : tensor<4xf32>
}

// -----

// Tests that a mesh must be declared at module level (HasParent).
func.func @mesh_in_func() {
  // expected-error @+1 {{'omni.mesh' op expects parent op 'builtin.module'}}
  omni.mesh @m axes = ["dp"] shape = [2]
  return
}

// -----

//===----------------------------------------------------------------------===//
// Primitives
//===----------------------------------------------------------------------===//

// Tests that select rejects a predicate of another shape (C1; the Elementwise
// trait reports it before the op verifier runs).
func.func @select_pred_shape(%p: tensor<3xi1>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'omni.select' op all non-scalar operands/results must have the same shape and base type}}
  %0 = omni.select %p, %x, %x : tensor<3xi1>, tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that cast rejects a result of another shape (C1; the Elementwise
// trait reports it before the op verifier runs).
func.func @cast_shape(%x: tensor<4xf32>) -> tensor<2x2xbf16> {
  // expected-error @+1 {{'omni.cast' op all non-scalar operands/results must have the same shape and base type}}
  %0 = omni.cast %x : tensor<4xf32> -> tensor<2x2xbf16>
  return %0 : tensor<2x2xbf16>
}

// -----

// Tests that broadcast_in_dim rejects a change of element type (C1).
func.func @broadcast_in_dim_element_type(%x: tensor<4xf32>) -> tensor<2x4xf16> {
  // expected-error @+1 {{'omni.broadcast_in_dim' op operand element type 'f32' differs from result element type 'f16'}}
  %0 = omni.broadcast_in_dim %x, dims = [1] : tensor<4xf32> -> tensor<2x4xf16>
  return %0 : tensor<2x4xf16>
}

// -----

// Tests that broadcast_in_dim needs one dims entry per operand dimension (C2).
func.func @broadcast_in_dim_dims_size(%x: tensor<4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'omni.broadcast_in_dim' op dims has 2 entries but the operand has rank 1}}
  %0 = omni.broadcast_in_dim %x, dims = [0, 1] : tensor<4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that broadcast_in_dim rejects dims that are not strictly
// increasing (C3).
func.func @broadcast_in_dim_dims_order(%x: tensor<4x4xf32>) -> tensor<4x4x2xf32> {
  // expected-error @+1 {{'omni.broadcast_in_dim' op dims [1, 0] must be strictly increasing and within the result rank 3}}
  %0 = omni.broadcast_in_dim %x, dims = [1, 0] : tensor<4x4xf32> -> tensor<4x4x2xf32>
  return %0 : tensor<4x4x2xf32>
}

// -----

// Tests that broadcast_in_dim rejects dims beyond the result rank (C3).
func.func @broadcast_in_dim_dims_range(%x: tensor<4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'omni.broadcast_in_dim' op dims [2] must be strictly increasing and within the result rank 2}}
  %0 = omni.broadcast_in_dim %x, dims = [2] : tensor<4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that broadcast_in_dim rejects an operand dimension that is neither
// 1 nor the result's (C4).
func.func @broadcast_in_dim_size(%x: tensor<3xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'omni.broadcast_in_dim' op operand dimension 0 has size 3 but result dimension 1 has size 4; expected 1 or equal sizes}}
  %0 = omni.broadcast_in_dim %x, dims = [1] : tensor<3xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that reshape rejects a change of element type (C1).
func.func @reshape_element_type(%x: tensor<2x6xf32>) -> tensor<3x4xf64> {
  // expected-error @+1 {{'omni.reshape' op operand element type 'f32' differs from result element type 'f64'}}
  %0 = omni.reshape %x : tensor<2x6xf32> -> tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// -----

// Tests that reshape rejects a change of element count (C2).
func.func @reshape_count(%x: tensor<2x6xf32>) -> tensor<3x5xf32> {
  // expected-error @+1 {{'omni.reshape' op cannot reshape 2x6 (12 elements) to 3x5 (15 elements)}}
  %0 = omni.reshape %x : tensor<2x6xf32> -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// -----

// Tests that transpose rejects a permutation that repeats a dimension (C1).
func.func @transpose_repeat(%x: tensor<2x3xf32>) -> tensor<2x2xf32> {
  // expected-error @+2 {{'omni.transpose' op permutation [0, 0] is not a permutation of the 2 dimensions of the operand}}
  // expected-error @+1 {{'omni.transpose' op failed to infer returned types}}
  %0 = omni.transpose %x, permutation = [0, 0] : tensor<2x3xf32> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

// Tests that transpose rejects a permutation of the wrong length (C1).
func.func @transpose_length(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+2 {{'omni.transpose' op permutation [1, 0, 2] is not a permutation of the 2 dimensions of the operand}}
  // expected-error @+1 {{'omni.transpose' op failed to infer returned types}}
  %0 = omni.transpose %x, permutation = [1, 0, 2] : tensor<2x3xf32> -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// Tests that transpose rejects a result type that differs from the
// inferred one.
func.func @transpose_result(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{'omni.transpose' op inferred type(s) 'tensor<3x2xf32>' are incompatible with return type(s) of operation 'tensor<2x3xf32>'}}
  // expected-error @+1 {{'omni.transpose' op failed to infer returned types}}
  %0 = omni.transpose %x, permutation = [1, 0] : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Tests that slice needs one start, limit and stride per dimension (C1).
func.func @slice_entries(%x: tensor<4x4xf32>) -> tensor<2xf32> {
  // expected-error @+2 {{'omni.slice' op slice has 1 start, 1 limit and 1 stride entries but the operand has rank 2}}
  // expected-error @+1 {{'omni.slice' op failed to infer returned types}}
  %0 = omni.slice %x [0:2:1] : tensor<4x4xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Tests that slice rejects a limit beyond the dimension (C2).
func.func @slice_limit(%x: tensor<4x4xf32>) -> tensor<5x4xf32> {
  // expected-error @+2 {{'omni.slice' op slice 0:5 of dimension 0 is outside 0:4}}
  // expected-error @+1 {{'omni.slice' op failed to infer returned types}}
  %0 = omni.slice %x [0:5:1, 0:4:1] : tensor<4x4xf32> -> tensor<5x4xf32>
  return %0 : tensor<5x4xf32>
}

// -----

// Tests that slice rejects a start after the limit (C2).
func.func @slice_start_after_limit(%x: tensor<4x4xf32>) -> tensor<0x4xf32> {
  // expected-error @+2 {{'omni.slice' op slice 3:2 of dimension 0 is outside 0:4}}
  // expected-error @+1 {{'omni.slice' op failed to infer returned types}}
  %0 = omni.slice %x [3:2:1, 0:4:1] : tensor<4x4xf32> -> tensor<0x4xf32>
  return %0 : tensor<0x4xf32>
}

// -----

// Tests that slice rejects a negative start (C2).
func.func @slice_negative_start(%x: tensor<4x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+2 {{'omni.slice' op slice -1:2 of dimension 0 is outside 0:4}}
  // expected-error @+1 {{'omni.slice' op failed to infer returned types}}
  %0 = omni.slice %x [-1:2:1, 0:4:1] : tensor<4x4xf32> -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// Tests that slice rejects a zero stride (C3).
func.func @slice_stride(%x: tensor<4x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+2 {{'omni.slice' op stride of dimension 1 must be >= 1, found 0}}
  // expected-error @+1 {{'omni.slice' op failed to infer returned types}}
  %0 = omni.slice %x [0:2:1, 0:4:0] : tensor<4x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that concat needs at least one input (C1).
func.func @concat_empty() -> tensor<0xf32> {
  // expected-error @+2 {{'omni.concat' op needs at least one input}}
  // expected-error @+1 {{'omni.concat' op failed to infer returned types}}
  %0 = omni.concat dim = 0 : () -> tensor<0xf32>
  return %0 : tensor<0xf32>
}

// -----

// Tests that concat rejects inputs of different element types (C2).
func.func @concat_element_type(%a: tensor<1x4xf32>, %b: tensor<2x4xf16>) -> tensor<3x4xf32> {
  // expected-error @+2 {{'omni.concat' op input #1 has type 'tensor<2x4xf16>' but input #0 has type 'tensor<1x4xf32>'; element type and rank must match}}
  // expected-error @+1 {{'omni.concat' op failed to infer returned types}}
  %0 = omni.concat %a, %b dim = 0 : (tensor<1x4xf32>, tensor<2x4xf16>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// Tests that concat rejects inputs of different ranks (C2).
func.func @concat_rank(%a: tensor<1x4xf32>, %b: tensor<4xf32>) -> tensor<2x4xf32> {
  // expected-error @+2 {{'omni.concat' op input #1 has type 'tensor<4xf32>' but input #0 has type 'tensor<1x4xf32>'; element type and rank must match}}
  // expected-error @+1 {{'omni.concat' op failed to infer returned types}}
  %0 = omni.concat %a, %b dim = 0 : (tensor<1x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that concat rejects a dimension outside the rank (C3).
func.func @concat_dim(%a: tensor<1x4xf32>) -> tensor<1x8xf32> {
  // expected-error @+2 {{'omni.concat' op dim 2 is outside the rank 2 of the inputs}}
  // expected-error @+1 {{'omni.concat' op failed to infer returned types}}
  %0 = omni.concat %a, %a dim = 2 : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x8xf32>
  return %0 : tensor<1x8xf32>
}

// -----

// Tests that concat rejects inputs that differ outside the concatenated
// dimension (C4).
func.func @concat_shape(%a: tensor<1x4xf32>, %b: tensor<2x3xf32>) -> tensor<3x4xf32> {
  // expected-error @+2 {{'omni.concat' op input #1 has shape 2x3 but input #0 has shape 1x4; they may differ only in dimension 0}}
  // expected-error @+1 {{'omni.concat' op failed to infer returned types}}
  %0 = omni.concat %a, %b dim = 0 : (tensor<1x4xf32>, tensor<2x3xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// Tests that pad needs one low and one high entry per dimension (C1).
func.func @pad_entries(%x: tensor<2x2xf32>) -> tensor<2x4xf32> {
  // expected-error @+2 {{'omni.pad' op padding has 1 low and 2 high entries but the operand has rank 2}}
  // expected-error @+1 {{'omni.pad' op failed to infer returned types}}
  %0 = omni.pad %x low = [1] high = [0, 1] value = 0.0 : tensor<2x2xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that pad rejects a negative amount (C2).
func.func @pad_negative(%x: tensor<2x2xf32>) -> tensor<2x1xf32> {
  // expected-error @+2 {{'omni.pad' op padding of dimension 1 must be non-negative, found low -1 high 0}}
  // expected-error @+1 {{'omni.pad' op failed to infer returned types}}
  %0 = omni.pad %x low = [0, -1] high = [0, 0] value = 0.0 : tensor<2x2xf32> -> tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}

// -----

// Tests that reduce rejects dims that are not strictly increasing (C1).
func.func @reduce_dims_order(%x: tensor<2x3xf32>) -> tensor<f32> {
  // expected-error @+2 {{'omni.reduce' op dims [1, 0] must be strictly increasing and within the rank 2 of the operand}}
  // expected-error @+1 {{'omni.reduce' op failed to infer returned types}}
  %0 = omni.reduce sum %x dims = [1, 0] : tensor<2x3xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that reduce rejects dims beyond the rank (C1).
func.func @reduce_dims_range(%x: tensor<2x3xf32>) -> tensor<2xf32> {
  // expected-error @+2 {{'omni.reduce' op dims [2] must be strictly increasing and within the rank 2 of the operand}}
  // expected-error @+1 {{'omni.reduce' op failed to infer returned types}}
  %0 = omni.reduce sum %x dims = [2] : tensor<2x3xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Tests that a mean reduction needs a float element type (C2).
func.func @reduce_mean_int(%x: tensor<2x3xi32>) -> tensor<2xi32> {
  // expected-error @+2 {{'omni.reduce' op mean needs a float element type, found 'i32'}}
  // expected-error @+1 {{'omni.reduce' op failed to infer returned types}}
  %0 = omni.reduce mean %x dims = [1] : tensor<2x3xi32> -> tensor<2xi32>
  return %0 : tensor<2xi32>
}

// -----

// Tests that iota rejects a dimension outside the result rank (C1).
func.func @iota_dim() -> tensor<4x2xi64> {
  // expected-error @+1 {{'omni.iota' op dim 2 is outside the result rank 2}}
  %0 = omni.iota dim = 2 : tensor<4x2xi64>
  return %0 : tensor<4x2xi64>
}

// -----

// Tests that iota rejects a negative dimension (C1).
func.func @iota_negative_dim() -> tensor<4xi64> {
  // expected-error @+1 {{'omni.iota' op dim -1 is outside the result rank 1}}
  %0 = omni.iota dim = -1 : tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

// Tests that constant rejects a value that is not a tensor (C1).
func.func @constant_vector() {
  // expected-error @+1 {{'omni.constant' op value must have a statically shaped tensor type}}
  %0 = omni.constant dense<1.0> : vector<2xf32>
  return
}

// -----

// Tests that constant rejects an element type omni does not support (C1).
func.func @constant_element_type() {
  // expected-error @+1 {{'omni.constant' op result #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 1-bit signless integer or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2xi8>'}}
  %0 = omni.constant dense<1> : tensor<2xi8>
  return
}

// -----

// Tests that matmul rejects an operand of rank 1 (C1).
func.func @matmul_rank(%a: tensor<3xf32>, %b: tensor<3x4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{'omni.matmul' op operands must have rank >= 2, found 1 and 2}}
  // expected-error @+1 {{'omni.matmul' op failed to infer returned types}}
  %0 = omni.matmul %a, %b : tensor<3xf32>, tensor<3x4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that matmul rejects operands of different element types (C1).
func.func @matmul_element_type(%a: tensor<2x3xf32>, %b: tensor<3x4xf16>) -> tensor<2x4xf32> {
  // expected-error @+2 {{'omni.matmul' op element types differ: 'f32' and 'f16'}}
  // expected-error @+1 {{'omni.matmul' op failed to infer returned types}}
  %0 = omni.matmul %a, %b : tensor<2x3xf32>, tensor<3x4xf16> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that matmul rejects batch dimensions that differ (C2).
func.func @matmul_batch(%a: tensor<2x2x3xf32>, %b: tensor<5x3x4xf32>) -> tensor<2x2x4xf32> {
  // expected-error @+2 {{'omni.matmul' op batch dimensions of lhs 2x2x3 and rhs 5x3x4 differ (rhs may also have rank 2)}}
  // expected-error @+1 {{'omni.matmul' op failed to infer returned types}}
  %0 = omni.matmul %a, %b : tensor<2x2x3xf32>, tensor<5x3x4xf32> -> tensor<2x2x4xf32>
  return %0 : tensor<2x2x4xf32>
}

// -----

// Tests that matmul rejects mismatched contraction dims (C3).
func.func @matmul_contraction(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{'omni.matmul' op contraction dimensions differ: lhs 2x3 contracts 3 but rhs 4x3 contracts 4}}
  // expected-error @+1 {{'omni.matmul' op failed to infer returned types}}
  %0 = omni.matmul %a, %b : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Tests that conv2d rejects a non-4-D input (C1).
func.func @conv2d_rank(%x: tensor<4x8x8xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<8x6x6xf32> {
  // expected-error @+2 {{'omni.conv2d' op input (NCHW) and filter (OIHW) must have rank 4, found 3 and 4}}
  // expected-error @+1 {{'omni.conv2d' op failed to infer returned types}}
  %0 = omni.conv2d %x, %w : tensor<4x8x8xf32>, tensor<8x4x3x3xf32> -> tensor<8x6x6xf32>
  return %0 : tensor<8x6x6xf32>
}

// -----

// Tests that conv2d rejects input and filter of different element types (C1).
func.func @conv2d_element_type(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xbf16>) -> tensor<1x8x6x6xf32> {
  // expected-error @+2 {{'omni.conv2d' op element types differ: 'f32' and 'bf16'}}
  // expected-error @+1 {{'omni.conv2d' op failed to infer returned types}}
  %0 = omni.conv2d %x, %w : tensor<1x4x8x8xf32>, tensor<8x4x3x3xbf16> -> tensor<1x8x6x6xf32>
  return %0 : tensor<1x8x6x6xf32>
}

// -----

// Tests that conv2d rejects a channel mismatch (C2).
func.func @conv2d_channels(%x: tensor<1x3x8x8xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<1x8x6x6xf32> {
  // expected-error @+2 {{'omni.conv2d' op input has 3 channels but the filter expects 4}}
  // expected-error @+1 {{'omni.conv2d' op failed to infer returned types}}
  %0 = omni.conv2d %x, %w : tensor<1x3x8x8xf32>, tensor<8x4x3x3xf32> -> tensor<1x8x6x6xf32>
  return %0 : tensor<1x8x6x6xf32>
}

// -----

// Tests that conv2d needs two strides (C3).
func.func @conv2d_strides_size(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<1x8x6x6xf32> {
  // expected-error @+2 {{'omni.conv2d' op strides, padding and dilation need 2 entries each}}
  // expected-error @+1 {{'omni.conv2d' op failed to infer returned types}}
  %0 = omni.conv2d %x, %w {strides = array<i64: 1>} : tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32> -> tensor<1x8x6x6xf32>
  return %0 : tensor<1x8x6x6xf32>
}

// -----

// Tests that conv2d rejects a zero stride (C3).
func.func @conv2d_stride_zero(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<1x8x6x6xf32> {
  // expected-error @+2 {{'omni.conv2d' op strides and dilation must be >= 1 and padding >= 0, found strides [0, 1] padding [0, 0] dilation [1, 1]}}
  // expected-error @+1 {{'omni.conv2d' op failed to infer returned types}}
  %0 = omni.conv2d %x, %w {strides = array<i64: 0, 1>} : tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32> -> tensor<1x8x6x6xf32>
  return %0 : tensor<1x8x6x6xf32>
}

// -----

// Tests that conv2d rejects negative padding (C3).
func.func @conv2d_padding_negative(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<1x8x4x6xf32> {
  // expected-error @+2 {{'omni.conv2d' op strides and dilation must be >= 1 and padding >= 0, found strides [1, 1] padding [-1, 0] dilation [1, 1]}}
  // expected-error @+1 {{'omni.conv2d' op failed to infer returned types}}
  %0 = omni.conv2d %x, %w {padding = array<i64: -1, 0>} : tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32> -> tensor<1x8x4x6xf32>
  return %0 : tensor<1x8x4x6xf32>
}

// -----

// Tests that conv2d rejects a filter larger than the padded input (C4).
func.func @conv2d_output_size(%x: tensor<1x4x2x2xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<1x8x1x1xf32> {
  // expected-error @+2 {{'omni.conv2d' op the filter 8x4x3x3 does not fit the input 1x4x2x2 with padding [0, 0] and dilation [1, 1]}}
  // expected-error @+1 {{'omni.conv2d' op failed to infer returned types}}
  %0 = omni.conv2d %x, %w : tensor<1x4x2x2xf32>, tensor<8x4x3x3xf32> -> tensor<1x8x1x1xf32>
  return %0 : tensor<1x8x1x1xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Composites
//===----------------------------------------------------------------------===//

// Tests that softmax rejects a dimension outside the rank (C1).
func.func @softmax_dim(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'omni.softmax' op dim 2 is outside the rank 2}}
  %0 = omni.softmax %x, dim = 2 : tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Tests that gelu rejects an unknown approximation keyword
// (GeluApproximation).
func.func @gelu_approximation(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{unknown gelu_approximation 'sigmoid'}}
  %0 = omni.gelu sigmoid %x : tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Tests that layer_norm rejects a 0-D operand (C1).
func.func @layer_norm_rank(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+2 {{'omni.layer_norm' op operand must have rank >= 1}}
  // expected-error @+1 {{'omni.layer_norm' op failed to infer returned types}}
  %0 = omni.layer_norm %x : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that layer_norm rejects a weight of the wrong size (C2).
func.func @layer_norm_weight(%x: tensor<2x8xf32>, %w: tensor<4xf32>) -> tensor<2x8xf32> {
  // expected-error @+2 {{'omni.layer_norm' op weight has type 'tensor<4xf32>' but expected 'tensor<8xf32>'}}
  // expected-error @+1 {{'omni.layer_norm' op failed to infer returned types}}
  %0 = omni.layer_norm %x weight %w : (tensor<2x8xf32>, tensor<4xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Tests that layer_norm rejects a bias of another element type (C2).
func.func @layer_norm_bias(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf16>) -> tensor<2x8xf32> {
  // expected-error @+2 {{'omni.layer_norm' op bias has type 'tensor<8xf16>' but expected 'tensor<8xf32>'}}
  // expected-error @+1 {{'omni.layer_norm' op failed to infer returned types}}
  %0 = omni.layer_norm %x weight %w bias %b : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf16>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Tests that layer_norm rejects eps = 0 (C3).
func.func @layer_norm_eps(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+2 {{'omni.layer_norm' op eps must be > 0, found 0.000000e+00}}
  // expected-error @+1 {{'omni.layer_norm' op failed to infer returned types}}
  %0 = omni.layer_norm %x {eps = 0.0} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Tests that rms_norm rejects a 0-D operand (C1).
func.func @rms_norm_rank(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+2 {{'omni.rms_norm' op operand must have rank >= 1}}
  // expected-error @+1 {{'omni.rms_norm' op failed to infer returned types}}
  %0 = omni.rms_norm %x : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that rms_norm rejects a 2-D weight (C2).
func.func @rms_norm_weight(%x: tensor<2x8xf32>, %w: tensor<1x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+2 {{'omni.rms_norm' op weight has type 'tensor<1x8xf32>' but expected 'tensor<8xf32>'}}
  // expected-error @+1 {{'omni.rms_norm' op failed to infer returned types}}
  %0 = omni.rms_norm %x weight %w : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Tests that rms_norm rejects a negative eps (C3).
func.func @rms_norm_eps(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+2 {{'omni.rms_norm' op eps must be > 0, found -1.000000e+00}}
  // expected-error @+1 {{'omni.rms_norm' op failed to infer returned types}}
  %0 = omni.rms_norm %x {eps = -1.0} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Tests that attention_grad rejects f64 operands (C1: f32, bf16 or f16).
func.func @attention_grad_f64(%q: tensor<1x2x4x8xf64>) -> tensor<1x2x4x8xf64> {
  // expected-error @+2 {{'omni.attention_grad' op the element type must be f32, bf16 or f16, found 'tensor<1x2x4x8xf64>'}}
  // expected-error @+1 {{'omni.attention_grad' op failed to infer returned types}}
  %g:3 = omni.attention_grad %q, %q, %q, %q, %q : (tensor<1x2x4x8xf64>, tensor<1x2x4x8xf64>, tensor<1x2x4x8xf64>, tensor<1x2x4x8xf64>, tensor<1x2x4x8xf64>) -> (tensor<1x2x4x8xf64>, tensor<1x2x4x8xf64>, tensor<1x2x4x8xf64>)
  return %g#0 : tensor<1x2x4x8xf64>
}

// -----

// Tests that attention_grad rejects operands of mixed element types (C1).
func.func @attention_grad_mixed(%q: tensor<1x2x4x8xbf16>, %o: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xbf16> {
  // expected-error @+2 {{'omni.attention_grad' op every operand must be a rank-4 tensor of the query's element type 'bf16', found 'tensor<1x2x4x8xf32>'}}
  // expected-error @+1 {{'omni.attention_grad' op failed to infer returned types}}
  %g:3 = omni.attention_grad %q, %q, %q, %o, %o : (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>)
  return %g#0 : tensor<1x2x4x8xbf16>
}

// -----

// Tests that attention_grad rejects a non-positive scale (C3).
func.func @attention_grad_scale(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+2 {{'omni.attention_grad' op scale must be > 0, found -1.250000e-01}}
  // expected-error @+1 {{'omni.attention_grad' op failed to infer returned types}}
  %g:3 = omni.attention_grad %q, %k, %k, %q, %q {scale = -0.125} : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>)
  return %g#0 : tensor<1x2x4x8xf32>
}

// -----

// Tests that attention_grad rejects a mask of the wrong shape (C4).
func.func @attention_grad_mask(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %m: tensor<1x1x4x5xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+2 {{'omni.attention_grad' op mask has type 'tensor<1x1x4x5xf32>' but expected shape [1|1, 2|1, 4, 6] of 'f32'}}
  // expected-error @+1 {{'omni.attention_grad' op failed to infer returned types}}
  %g:3 = omni.attention_grad %q, %k, %k, %q, %q mask %m : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x5xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>)
  return %g#0 : tensor<1x2x4x8xf32>
}

// -----

// Tests that attention_grad rejects an output of the wrong shape (C2).
func.func @attention_grad_output(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %o: tensor<1x2x6x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+2 {{'omni.attention_grad' op output and d_output must have shape 1x2x4x8, found 1x2x6x8 and 1x2x6x8}}
  // expected-error @+1 {{'omni.attention_grad' op failed to infer returned types}}
  %g:3 = omni.attention_grad %q, %k, %k, %o, %o : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>)
  return %g#0 : tensor<1x2x4x8xf32>
}

// -----

// Tests that attention rejects a 3-D query (C1).
func.func @attention_rank(%q: tensor<2x4x8xf32>, %k: tensor<1x2x6x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+2 {{'omni.attention' op query, key and value must have rank 4 ([B, H, S, D])}}
  // expected-error @+1 {{'omni.attention' op failed to infer returned types}}
  %0 = omni.attention %q, %k, %k : (tensor<2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) -> tensor<2x4x8xf32>
  return %0 : tensor<2x4x8xf32>
}

// -----

// Tests that attention rejects operands of different element types (C1).
func.func @attention_element_type(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf16>) -> tensor<1x2x4x8xf32> {
  // expected-error @+2 {{'omni.attention' op query, key and value must have one element type}}
  // expected-error @+1 {{'omni.attention' op failed to infer returned types}}
  %0 = omni.attention %q, %k, %k : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf16>, tensor<1x2x6x8xf16>) -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

// Tests that attention rejects a head count that differs between query and
// key (C2).
func.func @attention_heads(%q: tensor<1x2x4x8xf32>, %k: tensor<1x3x6x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+2 {{'omni.attention' op batch and head dimensions differ: query 1x2x4x8, key 1x3x6x8, value 1x3x6x8}}
  // expected-error @+1 {{'omni.attention' op failed to infer returned types}}
  %0 = omni.attention %q, %k, %k : (tensor<1x2x4x8xf32>, tensor<1x3x6x8xf32>, tensor<1x3x6x8xf32>) -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

// Tests that attention rejects key and value of different sequence
// lengths (C2).
func.func @attention_kv_length(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x5x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+2 {{'omni.attention' op key has sequence length 6 but value has 5}}
  // expected-error @+1 {{'omni.attention' op failed to infer returned types}}
  %0 = omni.attention %q, %k, %v : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x5x8xf32>) -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

// Tests that attention rejects query and key of different head
// dimensions (C2).
func.func @attention_head_dim(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x16xf32>) -> tensor<1x2x4x16xf32> {
  // expected-error @+2 {{'omni.attention' op query has head dimension 8 but key has 16}}
  // expected-error @+1 {{'omni.attention' op failed to infer returned types}}
  %0 = omni.attention %q, %k, %k : (tensor<1x2x4x8xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x16xf32>) -> tensor<1x2x4x16xf32>
  return %0 : tensor<1x2x4x16xf32>
}

// -----

// Tests that attention rejects a mask of the wrong shape (C3).
func.func @attention_mask(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %m: tensor<1x1x4x4xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+2 {{'omni.attention' op mask has type 'tensor<1x1x4x4xf32>' but expected shape [1|1, 2|1, 4, 6] of 'f32'}}
  // expected-error @+1 {{'omni.attention' op failed to infer returned types}}
  %0 = omni.attention %q, %k, %k mask %m : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

// Tests that attention rejects a non-positive scale (C4).
func.func @attention_scale(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+2 {{'omni.attention' op scale must be > 0, found 0.000000e+00}}
  // expected-error @+1 {{'omni.attention' op failed to infer returned types}}
  %0 = omni.attention %q, %k, %k {scale = 0.0} : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

// Tests that linear rejects a 1-D weight (C1).
func.func @linear_weight_rank(%x: tensor<2x8xf32>, %w: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+2 {{'omni.linear' op input 'tensor<2x8xf32>' and weight 'tensor<8xf32>' must have rank >= 1 and rank 2 and one element type}}
  // expected-error @+1 {{'omni.linear' op failed to infer returned types}}
  %0 = omni.linear %x, %w : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Tests that linear rejects input and weight of different element
// types (C1).
func.func @linear_element_type(%x: tensor<2x8xf32>, %w: tensor<4x8xbf16>) -> tensor<2x4xf32> {
  // expected-error @+2 {{'omni.linear' op input 'tensor<2x8xf32>' and weight 'tensor<4x8xbf16>' must have rank >= 1 and rank 2 and one element type}}
  // expected-error @+1 {{'omni.linear' op failed to infer returned types}}
  %0 = omni.linear %x, %w : (tensor<2x8xf32>, tensor<4x8xbf16>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that linear rejects an input whose features the weight does not
// take (C2).
func.func @linear_features(%x: tensor<2x6xf32>, %w: tensor<4x8xf32>) -> tensor<2x4xf32> {
  // expected-error @+2 {{'omni.linear' op input has 6 features but the weight 4x8 expects 8}}
  // expected-error @+1 {{'omni.linear' op failed to infer returned types}}
  %0 = omni.linear %x, %w : (tensor<2x6xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that linear rejects a bias of the wrong size (C3).
func.func @linear_bias(%x: tensor<2x8xf32>, %w: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<2x4xf32> {
  // expected-error @+2 {{'omni.linear' op bias has type 'tensor<8xf32>' but expected 'tensor<4xf32>'}}
  // expected-error @+1 {{'omni.linear' op failed to infer returned types}}
  %0 = omni.linear %x, %w bias %b : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that lora_linear applies linear's constraints (C1).
func.func @lora_linear_features(%x: tensor<2x6xf32>, %w: tensor<4x8xf32>, %a: tensor<2x8xf32>, %b: tensor<4x2xf32>) -> tensor<2x4xf32> {
  // expected-error @+2 {{'omni.lora_linear' op input has 6 features but the weight 4x8 expects 8}}
  // expected-error @+1 {{'omni.lora_linear' op failed to infer returned types}}
  %0 = omni.lora_linear %x, %w lora(%a, %b) {scale = 2.0} : (tensor<2x6xf32>, tensor<4x8xf32>, tensor<2x8xf32>, tensor<4x2xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that lora_linear rejects adapters of mismatched ranks r (C2).
func.func @lora_linear_adapter(%x: tensor<2x8xf32>, %w: tensor<4x8xf32>, %a: tensor<2x8xf32>, %b: tensor<4x3xf32>) -> tensor<2x4xf32> {
  // expected-error @+2 {{'omni.lora_linear' op lora_a 'tensor<2x8xf32>' and lora_b 'tensor<4x3xf32>' must be [r, 8] and [4, r] with r >= 1 and element type 'f32'}}
  // expected-error @+1 {{'omni.lora_linear' op failed to infer returned types}}
  %0 = omni.lora_linear %x, %w lora(%a, %b) {scale = 2.0} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<2x8xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that lora_linear rejects an adapter of rank r = 0 (C2).
func.func @lora_linear_rank_zero(%x: tensor<2x8xf32>, %w: tensor<4x8xf32>, %a: tensor<0x8xf32>, %b: tensor<4x0xf32>) -> tensor<2x4xf32> {
  // expected-error @+2 {{'omni.lora_linear' op lora_a 'tensor<0x8xf32>' and lora_b 'tensor<4x0xf32>' must be [r, 8] and [4, r] with r >= 1 and element type 'f32'}}
  // expected-error @+1 {{'omni.lora_linear' op failed to infer returned types}}
  %0 = omni.lora_linear %x, %w lora(%a, %b) {scale = 2.0} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<0x8xf32>, tensor<4x0xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that lora_linear rejects adapters of another element type (C2).
func.func @lora_linear_element_type(%x: tensor<2x8xf32>, %w: tensor<4x8xf32>, %a: tensor<2x8xbf16>, %b: tensor<4x2xbf16>) -> tensor<2x4xf32> {
  // expected-error @+2 {{'omni.lora_linear' op lora_a 'tensor<2x8xbf16>' and lora_b 'tensor<4x2xbf16>' must be [r, 8] and [4, r] with r >= 1 and element type 'f32'}}
  // expected-error @+1 {{'omni.lora_linear' op failed to infer returned types}}
  %0 = omni.lora_linear %x, %w lora(%a, %b) {scale = 2.0} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<2x8xbf16>, tensor<4x2xbf16>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Diffusion RL
//===----------------------------------------------------------------------===//

// Tests that flow_schedule needs at least one step (C1).
func.func @flow_schedule_steps() {
  // expected-error @+2 {{'omni.flow_schedule' op num_steps must be >= 1, found 0}}
  // expected-error @+1 {{'omni.flow_schedule' op failed to infer returned types}}
  %s, %t = omni.flow_schedule static_shift steps = 0 : tensor<1xf32>, tensor<0xf32>
  return
}

// -----

// Tests that a static shift must be positive (C2).
func.func @flow_schedule_shift() {
  // expected-error @+2 {{'omni.flow_schedule' op shift must be > 0, found 0.000000e+00}}
  // expected-error @+1 {{'omni.flow_schedule' op failed to infer returned types}}
  %s, %t = omni.flow_schedule static_shift steps = 10 {shift = 0.0} : tensor<11xf32>, tensor<10xf32>
  return
}

// -----

// Tests that a dynamic shift needs image_seq_len (C3).
func.func @flow_schedule_seq_len() {
  // expected-error @+2 {{'omni.flow_schedule' op dynamic_shift needs image_seq_len >= 1}}
  // expected-error @+1 {{'omni.flow_schedule' op failed to infer returned types}}
  %s, %t = omni.flow_schedule dynamic_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
  return
}

// -----

// Tests that a dynamic shift needs max_seq_len > base_seq_len (C3).
func.func @flow_schedule_seq_range() {
  // expected-error @+2 {{'omni.flow_schedule' op max_seq_len (256) must be greater than base_seq_len (256)}}
  // expected-error @+1 {{'omni.flow_schedule' op failed to infer returned types}}
  %s, %t = omni.flow_schedule dynamic_shift steps = 10 {image_seq_len = 4096, max_seq_len = 256} : tensor<11xf32>, tensor<10xf32>
  return
}

// -----

// Tests that shift_terminal needs a dynamic shift (C4).
func.func @flow_schedule_terminal_static() {
  // expected-error @+2 {{'omni.flow_schedule' op shift_terminal needs dynamic_shift}}
  // expected-error @+1 {{'omni.flow_schedule' op failed to infer returned types}}
  %s, %t = omni.flow_schedule static_shift steps = 10 {shift_terminal = 0.02} : tensor<11xf32>, tensor<10xf32>
  return
}

// -----

// Tests that shift_terminal lies in (0, 1) (C4).
func.func @flow_schedule_terminal_range() {
  // expected-error @+2 {{'omni.flow_schedule' op shift_terminal must be in (0, 1), found 1.000000e+00}}
  // expected-error @+1 {{'omni.flow_schedule' op failed to infer returned types}}
  %s, %t = omni.flow_schedule dynamic_shift steps = 10 {image_seq_len = 4096, shift_terminal = 1.0} : tensor<11xf32>, tensor<10xf32>
  return
}

// -----

// Tests that sde_step needs noise or next (C1).
func.func @sde_step_neither(%x: tensor<4x16xf32>, %s: tensor<11xf32>, %i: index) {
  // expected-error @+1 {{'omni.sde_step' op needs exactly one of `noise` (rollout) and `next` (training)}}
  %n, %lp, %m, %std = omni.sde_step sde %x, %x, %s[%i] : tensor<4x16xf32>, tensor<11xf32>
  return
}

// -----

// Tests that sde_step rejects both noise and next (C1).
func.func @sde_step_both(%x: tensor<4x16xf32>, %s: tensor<11xf32>, %i: index) {
  // expected-error @+1 {{'omni.sde_step' op needs exactly one of `noise` (rollout) and `next` (training)}}
  %n, %lp, %m, %std = omni.sde_step sde %x, %x, %s[%i] noise %x next %x : tensor<4x16xf32>, tensor<11xf32>
  return
}

// -----

// Tests that sde_step needs a batch dimension (C2).
func.func @sde_step_rank(%x: tensor<f32>, %s: tensor<11xf32>, %i: index) {
  // expected-error @+1 {{'omni.sde_step' op x must have a batch dimension (rank >= 1), found 'tensor<f32>'}}
  %n, %lp, %m, %std = omni.sde_step sde %x, %x, %s[%i] noise %x : tensor<f32>, tensor<11xf32>
  return
}

// -----

// Tests that sde_step rejects a velocity of another type than x (C2).
func.func @sde_step_v_type(%x: tensor<4x16xf32>, %v: tensor<4x8xf32>, %s: tensor<11xf32>, %i: index) {
  // expected-error @+1 {{'omni.sde_step' op failed to verify that all of {x, v} have same type}}
  %n, %lp, %m, %std = "omni.sde_step"(%x, %v, %s, %i, %x) <{type = #omni.sde_type<sde>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0>}> : (tensor<4x16xf32>, tensor<4x8xf32>, tensor<11xf32>, index, tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<f32>)
  return
}

// -----

// Tests that sde_step rejects noise of another type than x (C2).
func.func @sde_step_noise_type(%x: tensor<4x16xf32>, %e: tensor<4x16xf64>, %s: tensor<11xf32>, %i: index) {
  // expected-error @+1 {{'omni.sde_step' op failed to verify that noise has the type of x}}
  %n, %lp, %m, %std = "omni.sde_step"(%x, %x, %s, %i, %e) <{type = #omni.sde_type<sde>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0>}> : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<11xf32>, index, tensor<4x16xf64>) -> (tensor<4x16xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<f32>)
  return
}

// -----

// Tests that sde_step needs at least two sigmas (C3).
func.func @sde_step_sigmas(%x: tensor<4x16xf32>, %s: tensor<1xf32>, %i: index) {
  // expected-error @+1 {{'omni.sde_step' op sigmas must be 1-D with at least 2 entries, found 'tensor<1xf32>'}}
  %n, %lp, %m, %std = omni.sde_step sde %x, %x, %s[%i] noise %x : tensor<4x16xf32>, tensor<1xf32>
  return
}

// -----

// Tests that sde_step rejects a negative noise level (C4).
func.func @sde_step_noise_level(%x: tensor<4x16xf32>, %s: tensor<11xf32>, %i: index) {
  // expected-error @+2 {{'omni.sde_step' op noise_level must be >= 0, found -5.000000e-01}}
  // expected-error @+1 {{'omni.sde_step' op failed to infer returned types}}
  %n, %lp, %m, %std = omni.sde_step sde %x, %x, %s[%i] noise %x {noise_level = -0.5} : tensor<4x16xf32>, tensor<11xf32>
  return
}

// -----

// Tests that sde_step's noise_level operand is a 0-D f64 (C4).
func.func @sde_step_noise_level_type(%x: tensor<4x16xf32>, %s: tensor<11xf32>, %i: index, %a: tensor<f32>) {
  // expected-error @+1 {{'omni.sde_step' op operand #5 must be 0D tensor of 64-bit float values, but got 'tensor<f32>'}}
  %n, %lp, %m, %std = "omni.sde_step"(%x, %x, %s, %i, %x, %a) <{type = #omni.sde_type<sde>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 1>}> : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<11xf32>, index, tensor<4x16xf32>, tensor<f32>) -> (tensor<4x16xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<f32>)
  return
}

// -----

// Tests that sde_step's noise_level operand is 0-D (C4).
func.func @sde_step_noise_level_rank(%x: tensor<4x16xf32>, %s: tensor<11xf32>, %i: index, %a: tensor<1xf64>) {
  // expected-error @+1 {{'omni.sde_step' op operand #5 must be 0D tensor of 64-bit float values, but got 'tensor<1xf64>'}}
  %n, %lp, %m, %std = "omni.sde_step"(%x, %x, %s, %i, %x, %a) <{type = #omni.sde_type<sde>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 1>}> : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<11xf32>, index, tensor<4x16xf32>, tensor<1xf64>) -> (tensor<4x16xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<f32>)
  return
}

// -----

// Tests that cfg_combine's guidance_scale operand is a 0-D f64 (C2).
func.func @cfg_combine_scale_type(%v: tensor<8x16xf32>, %g: tensor<f32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'omni.cfg_combine' op operand #1 must be 0D tensor of 64-bit float values, but got 'tensor<f32>'}}
  %0 = "omni.cfg_combine"(%v, %g) <{guidance_scale = 4.5 : f64}> : (tensor<8x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that cfg_combine rejects an odd dimension 0 (C1).
func.func @cfg_combine_odd(%v: tensor<7x16xf32>) -> tensor<3x16xf32> {
  // expected-error @+2 {{'omni.cfg_combine' op operand must hold [uncond; cond] along dimension 0 (an even, non-zero size), found 'tensor<7x16xf32>'}}
  // expected-error @+1 {{'omni.cfg_combine' op failed to infer returned types}}
  %0 = omni.cfg_combine %v {guidance_scale = 4.5} : tensor<7x16xf32> -> tensor<3x16xf32>
  return %0 : tensor<3x16xf32>
}

// -----

// Tests that cfg_combine rejects a 0-D operand (C1).
func.func @cfg_combine_rank(%v: tensor<f32>) -> tensor<f32> {
  // expected-error @+2 {{'omni.cfg_combine' op operand must hold [uncond; cond] along dimension 0 (an even, non-zero size), found 'tensor<f32>'}}
  // expected-error @+1 {{'omni.cfg_combine' op failed to infer returned types}}
  %0 = omni.cfg_combine %v {guidance_scale = 4.5} : tensor<f32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that group_advantages rejects a reward count that is not a multiple
// of the group size (C1).
func.func @group_advantages_count(%r: tensor<5xf32>) -> tensor<5xf32> {
  // expected-error @+1 {{'omni.group_advantages' op rewards must be 1-D with a multiple of group_size (2) entries, found 'tensor<5xf32>'}}
  %0 = omni.group_advantages %r {group_size = 2} : tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

// Tests that group_advantages rejects 2-D rewards (C1).
func.func @group_advantages_rank(%r: tensor<2x2xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'omni.group_advantages' op rewards must be 1-D with a multiple of group_size (2) entries, found 'tensor<2x2xf32>'}}
  %0 = omni.group_advantages %r {group_size = 2} : tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

// Tests that group_advantages rejects group_size = 0 (C2).
func.func @group_advantages_group_size(%r: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'omni.group_advantages' op group_size must be >= 1, found 0}}
  %0 = omni.group_advantages %r {group_size = 0} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that group_advantages rejects ddof = 2 (C3).
func.func @group_advantages_ddof(%r: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'omni.group_advantages' op ddof must be 0 or 1, found 2}}
  %0 = omni.group_advantages %r {group_size = 2, ddof = 2} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that group_advantages rejects a negative eps (C4).
func.func @group_advantages_eps(%r: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'omni.group_advantages' op eps must be >= 0, found -1.000000e+00}}
  %0 = omni.group_advantages %r {group_size = 2, eps = -1.0} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that grpo_loss needs log-probabilities and advantages of one
// type (C1).
func.func @grpo_loss_types(%lp: tensor<4xf32>, %adv: tensor<8xf32>) {
  // expected-error @+2 {{'omni.grpo_loss' op log_prob, old_log_prob and advantages must be 1-D of one type, found 'tensor<4xf32>', 'tensor<4xf32>', 'tensor<8xf32>'}}
  // expected-error @+1 {{'omni.grpo_loss' op failed to infer returned types}}
  %l, %a, %c, %k = omni.grpo_loss %lp, %lp, %adv : (tensor<4xf32>, tensor<4xf32>, tensor<8xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  return
}

// -----

// Tests that grpo_loss needs mean, ref_mean and std together (C2).
func.func @grpo_loss_kl_partial(%lp: tensor<4xf32>, %m: tensor<4x16xf32>) {
  // expected-error @+2 {{'omni.grpo_loss' op mean, ref_mean and std must be given together}}
  // expected-error @+1 {{'omni.grpo_loss' op failed to infer returned types}}
  %l, %a, %c, %k = "omni.grpo_loss"(%lp, %lp, %lp, %m, %m) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 0, 0, 0>}> : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<4x16xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  return
}

// -----

// Tests that grpo_loss needs mean and ref_mean with the batch as
// dimension 0 (C2).
func.func @grpo_loss_kl_rows(%lp: tensor<4xf32>, %m: tensor<2x16xf32>, %s: tensor<f32>) {
  // expected-error @+2 {{'omni.grpo_loss' op mean 'tensor<2x16xf32>' and ref_mean 'tensor<2x16xf32>' must have one type with 4 rows of 'f32'}}
  // expected-error @+1 {{'omni.grpo_loss' op failed to infer returned types}}
  %l, %a, %c, %k = omni.grpo_loss %lp, %lp, %lp kl(%m, %m, %s) {beta = 0.04} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x16xf32>, tensor<2x16xf32>, tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  return
}

// -----

// Tests that grpo_loss needs std of the log-probabilities' element
// type (C2).
func.func @grpo_loss_kl_std(%lp: tensor<4xf32>, %m: tensor<4x16xf32>, %s: tensor<f64>) {
  // expected-error @+2 {{'omni.grpo_loss' op std must be a scalar of 'f32', found 'tensor<f64>'}}
  // expected-error @+1 {{'omni.grpo_loss' op failed to infer returned types}}
  %l, %a, %c, %k = omni.grpo_loss %lp, %lp, %lp kl(%m, %m, %s) {beta = 0.04} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<f64>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  return
}

// -----

// Tests that a non-zero beta needs the KL operands (C3).
func.func @grpo_loss_beta_without_kl(%lp: tensor<4xf32>) {
  // expected-error @+2 {{'omni.grpo_loss' op beta = 4.000000e-02 needs the KL operands kl(mean, ref_mean, std)}}
  // expected-error @+1 {{'omni.grpo_loss' op failed to infer returned types}}
  %l, %a, %c, %k = omni.grpo_loss %lp, %lp, %lp {beta = 0.04} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  return
}

// -----

// Tests that kl_form = exact needs dt (C4).
func.func @grpo_loss_exact_without_dt(%lp: tensor<4xf32>, %m: tensor<4x16xf32>, %s: tensor<f32>) {
  // expected-error @+2 {{'omni.grpo_loss' op kl_form = exact needs dt(...)}}
  // expected-error @+1 {{'omni.grpo_loss' op failed to infer returned types}}
  %l, %a, %c, %k = omni.grpo_loss %lp, %lp, %lp kl(%m, %m, %s) {beta = 0.04, kl_form = #omni.kl_form<exact>} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  return
}

// -----

// Tests that dt is only given with kl_form = exact (C4).
func.func @grpo_loss_dt_without_exact(%lp: tensor<4xf32>, %dt: tensor<f32>) {
  // expected-error @+2 {{'omni.grpo_loss' op dt is only used with kl_form = exact}}
  // expected-error @+1 {{'omni.grpo_loss' op failed to infer returned types}}
  %l, %a, %c, %k = omni.grpo_loss %lp, %lp, %lp dt(%dt) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  return
}

// -----

// Tests that dt is a scalar of the log-probabilities' element type (C4).
func.func @grpo_loss_dt_type(%lp: tensor<4xf32>, %m: tensor<4x16xf32>, %s: tensor<f32>, %dt: tensor<f64>) {
  // expected-error @+2 {{'omni.grpo_loss' op dt must be a scalar of 'f32', found 'tensor<f64>'}}
  // expected-error @+1 {{'omni.grpo_loss' op failed to infer returned types}}
  %l, %a, %c, %k = omni.grpo_loss %lp, %lp, %lp kl(%m, %m, %s) dt(%dt) {beta = 0.04, kl_form = #omni.kl_form<exact>} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>, tensor<f64>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  return
}

// -----

// Tests that grpo_loss rejects a negative clip_range (C5).
func.func @grpo_loss_clip_range(%lp: tensor<4xf32>) {
  // expected-error @+2 {{'omni.grpo_loss' op needs clip_range >= 0, adv_clip_max > 0 and beta >= 0, found -1.000000e-01, 5.000000e+00, 0.000000e+00}}
  // expected-error @+1 {{'omni.grpo_loss' op failed to infer returned types}}
  %l, %a, %c, %k = omni.grpo_loss %lp, %lp, %lp {clip_range = -0.1} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  return
}

// -----

// Tests that grpo_loss rejects adv_clip_max = 0 (C5).
func.func @grpo_loss_adv_clip_max(%lp: tensor<4xf32>) {
  // expected-error @+2 {{'omni.grpo_loss' op needs clip_range >= 0, adv_clip_max > 0 and beta >= 0, found 1.000000e-04, 0.000000e+00, 0.000000e+00}}
  // expected-error @+1 {{'omni.grpo_loss' op failed to infer returned types}}
  %l, %a, %c, %k = omni.grpo_loss %lp, %lp, %lp {adv_clip_max = 0.0} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  return
}

// -----

// Tests that grpo_loss rejects a negative beta (C5).
func.func @grpo_loss_beta_negative(%lp: tensor<4xf32>, %m: tensor<4x16xf32>, %s: tensor<f32>) {
  // expected-error @+2 {{'omni.grpo_loss' op needs clip_range >= 0, adv_clip_max > 0 and beta >= 0, found 1.000000e-04, 5.000000e+00, -4.000000e-02}}
  // expected-error @+1 {{'omni.grpo_loss' op failed to infer returned types}}
  %l, %a, %c, %k = omni.grpo_loss %lp, %lp, %lp kl(%m, %m, %s) {beta = -0.04} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  return
}

// -----

// Tests that grpo_loss's clip_range operand is 0-D (C6).
func.func @grpo_loss_clip_range_rank(%lp: tensor<4xf32>, %c: tensor<4xf64>) {
  // expected-error @+1 {{'omni.grpo_loss' op operand #3 must be 0D tensor of 64-bit float values, but got 'tensor<4xf64>'}}
  %l, %a, %c2, %k = omni.grpo_loss %lp, %lp, %lp clip_range(%c) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf64>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  return
}

// -----

// Tests that grpo_loss's adv_clip_max operand is an f64 (C6).
func.func @grpo_loss_adv_clip_max_type(%lp: tensor<4xf32>, %m: tensor<f32>) {
  // expected-error @+1 {{'omni.grpo_loss' op operand #3 must be 0D tensor of 64-bit float values, but got 'tensor<f32>'}}
  %l, %a, %c, %k = omni.grpo_loss %lp, %lp, %lp adv_clip_max(%m) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  return
}

// -----

// Tests that a beta operand needs the KL operands (C3).
func.func @grpo_loss_beta_operand_without_kl(%lp: tensor<4xf32>, %b: tensor<f64>) {
  // expected-error @+2 {{'omni.grpo_loss' op a beta(...) operand needs the KL operands kl(mean, ref_mean, std)}}
  // expected-error @+1 {{'omni.grpo_loss' op failed to infer returned types}}
  %l, %a, %c, %k = omni.grpo_loss %lp, %lp, %lp beta(%b) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f64>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  return
}

// -----

// Tests that adamw rejects a zero learning rate (C1).
func.func @adamw_lr(%p: tensor<8xf32>, %t: tensor<i64>) {
  // expected-error @+1 {{'omni.adamw' op needs lr > 0, eps > 0 and weight_decay >= 0, found 0.000000e+00, 1.000000e-08, 1.000000e-04}}
  %p2, %m2, %v2 = omni.adamw %p, %p, %p, %p, %t {lr = 0.0} : tensor<8xf32>
  return
}

// -----

// Tests that adamw rejects a negative weight decay (C1).
func.func @adamw_weight_decay(%p: tensor<8xf32>, %t: tensor<i64>) {
  // expected-error @+1 {{'omni.adamw' op needs lr > 0, eps > 0 and weight_decay >= 0, found 1.000000e-03, 1.000000e-08, -1.000000e-01}}
  %p2, %m2, %v2 = omni.adamw %p, %p, %p, %p, %t {lr = 1.0e-3, weight_decay = -0.1} : tensor<8xf32>
  return
}

// -----

// Tests that adamw rejects beta1 = 1 (C2).
func.func @adamw_beta1(%p: tensor<8xf32>, %t: tensor<i64>) {
  // expected-error @+1 {{'omni.adamw' op betas must be in [0, 1), found 1.000000e+00, 9.990000e-01}}
  %p2, %m2, %v2 = omni.adamw %p, %p, %p, %p, %t {lr = 1.0e-3, beta1 = 1.0} : tensor<8xf32>
  return
}

// -----

// Tests that adamw rejects a negative beta2 (C2).
func.func @adamw_beta2(%p: tensor<8xf32>, %t: tensor<i64>) {
  // expected-error @+1 {{'omni.adamw' op betas must be in [0, 1), found 9.000000e-01, -5.000000e-01}}
  %p2, %m2, %v2 = omni.adamw %p, %p, %p, %p, %t {lr = 1.0e-3, beta2 = -0.5} : tensor<8xf32>
  return
}

// -----

// Tests that clip_grad_norm needs a gradient (C1).
func.func @clip_grad_norm_empty() {
  // expected-error @+2 {{'omni.clip_grad_norm' op needs at least one gradient}}
  // expected-error @+1 {{'omni.clip_grad_norm' op failed to infer returned types}}
  %n = "omni.clip_grad_norm"() : () -> tensor<f32>
  return
}

// -----

// Tests that clip_grad_norm rejects max_norm = 0 (C2).
func.func @clip_grad_norm_max_norm(%a: tensor<8xf32>) {
  // expected-error @+2 {{'omni.clip_grad_norm' op max_norm must be > 0, found 0.000000e+00}}
  // expected-error @+1 {{'omni.clip_grad_norm' op failed to infer returned types}}
  %g, %n = omni.clip_grad_norm %a {max_norm = 0.0} : tensor<8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Autodiff markers
//===----------------------------------------------------------------------===//

// Tests that grad rejects a callee that does not exist (C1).
func.func @grad_unknown_callee(%w: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'omni.grad' op callee @missing is not a func.func in scope}}
  %g = omni.grad @missing(%w) wrt = [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// Tests that grad rejects a callee that is not a func.func (C1).
omni.mesh @mesh axes = ["dp"] shape = [2]
func.func @grad_callee_not_func(%w: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'omni.grad' op callee @mesh is not a func.func in scope}}
  %g = omni.grad @mesh(%w) wrt = [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// Tests that grad rejects operands that do not match the callee's
// arguments (C2).
func.func private @loss(tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
func.func @grad_operands(%w: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'omni.grad' op operand types ('tensor<4xf32>') do not match the arguments ('tensor<4xf32>', 'tensor<4xf32>') of @loss}}
  %g = omni.grad @loss(%w) wrt = [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// Tests that grad needs a callee whose first result is a 0-D float (C3).
func.func private @loss(tensor<4xf32>) -> tensor<4xf32>
func.func @grad_loss_rank(%w: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'omni.grad' op the first result of @loss must be a 0-D float tensor (the loss), found 'tensor<4xf32>'}}
  %g = omni.grad @loss(%w) wrt = [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// Tests that grad needs a callee with a result (C3).
func.func private @loss(tensor<4xf32>)
func.func @grad_loss_missing(%w: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'omni.grad' op the first result of @loss must be a 0-D float tensor (the loss), found no result}}
  %g = omni.grad @loss(%w) wrt = [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// Tests that grad needs a non-empty wrt (C4).
func.func private @loss(tensor<4xf32>) -> tensor<f32>
func.func @grad_wrt_empty(%w: tensor<4xf32>) {
  // expected-error @+1 {{'omni.grad' op wrt must name at least one operand}}
  omni.grad @loss(%w) wrt = [] : (tensor<4xf32>) -> ()
  return
}

// -----

// Tests that grad rejects a wrt index past the operands (C4).
func.func private @loss(tensor<4xf32>) -> tensor<f32>
func.func @grad_wrt_range(%w: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'omni.grad' op wrt [1] must be strictly increasing operand indices below 1}}
  %g = omni.grad @loss(%w) wrt = [1] : (tensor<4xf32>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// Tests that grad rejects a wrt that is not strictly increasing (C4).
func.func private @loss(tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
func.func @grad_wrt_order(%w: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // expected-error @+1 {{'omni.grad' op wrt [1, 0] must be strictly increasing operand indices below 2}}
  %g:2 = omni.grad @loss(%w, %w) wrt = [1, 0] : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %g#0, %g#1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that grad rejects differentiation with respect to an integer
// operand (C5).
func.func private @loss(tensor<4xf32>, tensor<4xi64>) -> tensor<f32>
func.func @grad_wrt_int(%w: tensor<4xf32>, %i: tensor<4xi64>) -> tensor<4xi64> {
  // expected-error @+1 {{'omni.grad' op cannot differentiate with respect to operand #1 of non-float type 'tensor<4xi64>'}}
  %g = omni.grad @loss(%w, %i) wrt = [1] : (tensor<4xf32>, tensor<4xi64>) -> tensor<4xi64>
  return %g : tensor<4xi64>
}

// -----

// Tests that grad returns the wrt operands' types (C6).
func.func private @loss(tensor<4xf32>, tensor<2xf32>) -> tensor<f32>
func.func @grad_results(%w: tensor<4xf32>, %x: tensor<2xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'omni.grad' op result types ('tensor<4xf32>') must be ('tensor<2xf32>')}}
  %g = omni.grad @loss(%w, %x) wrt = [1] : (tensor<4xf32>, tensor<2xf32>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// Tests that value_and_grad checks the callee like grad (C1).
func.func @value_and_grad_unknown_callee(%w: tensor<4xf32>) {
  // expected-error @+1 {{'omni.value_and_grad' op callee @missing is not a func.func in scope}}
  %l, %g = omni.value_and_grad @missing(%w) wrt = [0] : (tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>)
  return
}

// -----

// Tests that value_and_grad returns the callee's results before the
// gradients (C6).
func.func private @loss(tensor<4xf32>) -> (tensor<f32>, tensor<2xf32>)
func.func @value_and_grad_results(%w: tensor<4xf32>) {
  // expected-error @+1 {{'omni.value_and_grad' op result types ('tensor<f32>', 'tensor<4xf32>') must be ('tensor<f32>', 'tensor<2xf32>', 'tensor<4xf32>')}}
  %l, %g = omni.value_and_grad @loss(%w) wrt = [0] : (tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// Fusion regions and host calls
//===----------------------------------------------------------------------===//

// Tests that the fusion block arguments match the inputs (C1).
func.func @fusion_arguments(%a: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+1 {{'omni.fusion' op region arguments ('tensor<4xf16>') must match the inputs ('tensor<4xf32>')}}
  %r = omni.fusion (%a) : (tensor<4xf32>) -> tensor<4xf16> {
  ^bb0(%x: tensor<4xf16>):
    omni.yield %x : tensor<4xf16>
  }
  return %r : tensor<4xf16>
}

// -----

// Tests that the fusion yields its result types (C2).
func.func @fusion_yield(%a: tensor<4xf32>) -> tensor<4xf16> {
  %r = omni.fusion (%a) : (tensor<4xf32>) -> tensor<4xf16> {
  ^bb0(%x: tensor<4xf32>):
    // expected-error @+1 {{'omni.yield' op yields ('tensor<4xf32>') but the fusion returns ('tensor<4xf16>')}}
    omni.yield %x : tensor<4xf32>
  }
  return %r : tensor<4xf16>
}

// -----

// Tests that a fusion body holds no host_call (C3).
func.func @fusion_host_call(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = omni.fusion (%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    // expected-error @+1 {{'omni.host_call' op cannot be inside an omni.fusion region}}
    %y = omni.host_call "reward"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    omni.yield %y : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that a fusion body holds no nested fusion (C3).
func.func @fusion_nested(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = omni.fusion (%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    // expected-error @+1 {{'omni.fusion' op cannot be inside an omni.fusion region}}
    %y = omni.fusion (%x) : (tensor<4xf32>) -> tensor<4xf32> {
    ^bb0(%z: tensor<4xf32>):
      omni.yield %z : tensor<4xf32>
    }
    omni.yield %y : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that a fusion body holds no collective (C3).
omni.mesh @mesh axes = ["dp"] shape = [2]
func.func @fusion_collective(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = omni.fusion (%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    // expected-error @+1 {{'omni.all_reduce' op cannot be inside an omni.fusion region}}
    %y = omni.all_reduce sum %x over @mesh ["dp"] : tensor<4xf32>
    omni.yield %y : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that host_call rejects an empty callee name (C1).
func.func @host_call_empty(%x: tensor<4xf32>) {
  // expected-error @+1 {{'omni.host_call' op callee "" must be a name of [A-Za-z0-9_.] not starting with a digit}}
  omni.host_call ""(%x) : (tensor<4xf32>) -> ()
  return
}

// -----

// Tests that host_call rejects a callee name starting with a digit (C1).
func.func @host_call_digit(%x: tensor<4xf32>) {
  // expected-error @+1 {{'omni.host_call' op callee "2reward" must be a name of [A-Za-z0-9_.] not starting with a digit}}
  omni.host_call "2reward"(%x) : (tensor<4xf32>) -> ()
  return
}

// -----

// Tests that host_call rejects a callee name with other characters (C1).
func.func @host_call_chars(%x: tensor<4xf32>) {
  // expected-error @+1 {{'omni.host_call' op callee "jpeg-compressibility" must be a name of [A-Za-z0-9_.] not starting with a digit}}
  omni.host_call "jpeg-compressibility"(%x) : (tensor<4xf32>) -> ()
  return
}

// -----

//===----------------------------------------------------------------------===//
// Meshes, sharding and collectives
//===----------------------------------------------------------------------===//

// Tests that a mesh needs at least one axis (C1).
// expected-error @+1 {{'omni.mesh' op needs one size per axis and at least one axis, found 0 axes and 0 sizes}}
omni.mesh @mesh axes = [] shape = []

// -----

// Tests that a mesh needs one size per axis (C1).
// expected-error @+1 {{'omni.mesh' op needs one size per axis and at least one axis, found 2 axes and 1 sizes}}
omni.mesh @mesh axes = ["dp", "tp"] shape = [4]

// -----

// Tests that mesh axis names are unique (C2).
// expected-error @+1 {{'omni.mesh' op axis names must be non-empty and unique, found "dp" twice or empty}}
omni.mesh @mesh axes = ["dp", "dp"] shape = [2, 2]

// -----

// Tests that mesh axis names are non-empty (C2).
// expected-error @+1 {{'omni.mesh' op axis names must be non-empty and unique, found "" twice or empty}}
omni.mesh @mesh axes = [""] shape = [2]

// -----

// Tests that mesh axis sizes are positive (C3).
// expected-error @+1 {{'omni.mesh' op axis "tp" has size 0; expected >= 1}}
omni.mesh @mesh axes = ["dp", "tp"] shape = [2, 0]

// -----

// Tests that every sharding entry is a list of axis names (sharding C1).
func.func @sharding_entry(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{sharding entry #1 must be a list of axis names, found 3 : i64}}
  %0 = "omni.shard"(%x) <{sharding = #omni.sharding<@mesh, [["dp"], 3]>}> : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// Tests that every sharding entry lists strings (sharding C1).
func.func @sharding_entry_int(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{sharding entry #0 must be a list of axis names, found [0]}}
  %0 = "omni.shard"(%x) <{sharding = #omni.sharding<@mesh, [[0], []]>}> : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// Tests that a sharding names an axis at most once (sharding C2).
func.func @sharding_repeat(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{sharding uses mesh axis "dp" more than once}}
  %0 = "omni.shard"(%x) <{sharding = #omni.sharding<@mesh, [["dp"], ["dp"]]>}> : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// Tests that shard refers to an omni.mesh (C1).
func.func @shard_no_mesh(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'omni.shard' op mesh @mesh is not an omni.mesh}}
  %0 = "omni.shard"(%x) <{sharding = #omni.sharding<@mesh, [["dp"], []]>}> : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// Tests that shard refers to an omni.mesh for a 0-D tensor too (C1).
func.func @shard_no_mesh_scalar(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'omni.shard' op mesh @mesh is not an omni.mesh}}
  %0 = "omni.shard"(%x) <{sharding = #omni.sharding<@mesh, []>}> : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that a sharding has one entry per tensor dimension (C2).
omni.mesh @mesh axes = ["dp"] shape = [2]
func.func @shard_rank(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'omni.shard' op sharding has 1 entries but the tensor has rank 2}}
  %0 = "omni.shard"(%x) <{sharding = #omni.sharding<@mesh, [["dp"]]>}> : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// Tests that a sharding names axes of the mesh (C3).
omni.mesh @mesh axes = ["dp"] shape = [2]
func.func @shard_axis(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'omni.shard' op mesh @mesh has no axis "tp"}}
  %0 = "omni.shard"(%x) <{sharding = #omni.sharding<@mesh, [[], ["tp"]]>}> : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// Tests that a sharded dimension divides by the product of its axes'
// sizes (C4).
omni.mesh @mesh axes = ["dp", "tp"] shape = [4, 2]
func.func @shard_divisible(%x: tensor<12x4xf32>) -> tensor<12x4xf32> {
  // expected-error @+1 {{'omni.shard' op dimension 0 of size 12 is not divisible into 8 shards}}
  %0 = "omni.shard"(%x) <{sharding = #omni.sharding<@mesh, [["dp", "tp"], []]>}> : (tensor<12x4xf32>) -> tensor<12x4xf32>
  return %0 : tensor<12x4xf32>
}

// -----

// Tests that all_reduce refers to an omni.mesh (C1).
func.func @all_reduce_no_mesh(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'omni.all_reduce' op mesh @mesh is not an omni.mesh}}
  %0 = omni.all_reduce sum %x over @mesh ["dp"] : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that all_reduce names at least one axis (C2).
omni.mesh @mesh axes = ["dp"] shape = [2]
func.func @all_reduce_no_axes(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'omni.all_reduce' op needs at least one mesh axis}}
  %0 = omni.all_reduce sum %x over @mesh [] : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that all_reduce names each axis once (C2).
omni.mesh @mesh axes = ["dp"] shape = [2]
func.func @all_reduce_repeat(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'omni.all_reduce' op mesh axis "dp" is named twice}}
  %0 = omni.all_reduce sum %x over @mesh ["dp", "dp"] : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that all_reduce names axes of the mesh (C2).
omni.mesh @mesh axes = ["dp"] shape = [2]
func.func @all_reduce_axis(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'omni.all_reduce' op mesh @mesh has no axis "tp"}}
  %0 = omni.all_reduce sum %x over @mesh ["tp"] : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that all_gather refers to an omni.mesh (C1).
func.func @all_gather_no_mesh(%x: tensor<2x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'omni.all_gather' op mesh @mesh is not an omni.mesh}}
  %0 = omni.all_gather %x over @mesh ["dp"] dim = 0 : tensor<2x4xf32> -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// Tests that all_gather names axes of the mesh (C2).
omni.mesh @mesh axes = ["dp"] shape = [4]
func.func @all_gather_axis(%x: tensor<2x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'omni.all_gather' op mesh @mesh has no axis "tp"}}
  %0 = omni.all_gather %x over @mesh ["tp"] dim = 0 : tensor<2x4xf32> -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// Tests that all_gather keeps the element type (C3).
omni.mesh @mesh axes = ["dp"] shape = [4]
func.func @all_gather_element_type(%x: tensor<2x4xf32>) -> tensor<8x4xf16> {
  // expected-error @+1 {{'omni.all_gather' op operand and result must have the same element type and rank, found 'tensor<2x4xf32>' and 'tensor<8x4xf16>'}}
  %0 = omni.all_gather %x over @mesh ["dp"] dim = 0 : tensor<2x4xf32> -> tensor<8x4xf16>
  return %0 : tensor<8x4xf16>
}

// -----

// Tests that all_gather rejects a dimension outside the rank (C3).
omni.mesh @mesh axes = ["dp"] shape = [4]
func.func @all_gather_dim(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'omni.all_gather' op dim 2 is outside the rank 2}}
  %0 = omni.all_gather %x over @mesh ["dp"] dim = 2 : tensor<2x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that all_gather multiplies the gathered dimension by the group
// size (C4).
omni.mesh @mesh axes = ["dp"] shape = [4]
func.func @all_gather_size(%x: tensor<2x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'omni.all_gather' op expected the gathered dimension 0 to be 4 times the scattered one, found 'tensor<2x4xf32>' and 'tensor<4x4xf32>'}}
  %0 = omni.all_gather %x over @mesh ["dp"] dim = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// Tests that reduce_scatter refers to an omni.mesh (C1).
func.func @reduce_scatter_no_mesh(%x: tensor<8x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'omni.reduce_scatter' op mesh @mesh is not an omni.mesh}}
  %0 = omni.reduce_scatter sum %x over @mesh ["dp"] dim = 0 : tensor<8x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that reduce_scatter needs at least one axis (C2).
omni.mesh @mesh axes = ["dp"] shape = [4]
func.func @reduce_scatter_no_axes(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'omni.reduce_scatter' op needs at least one mesh axis}}
  %0 = omni.reduce_scatter sum %x over @mesh [] dim = 0 : tensor<8x4xf32> -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// Tests that reduce_scatter keeps the rank (C3).
omni.mesh @mesh axes = ["dp"] shape = [4]
func.func @reduce_scatter_rank(%x: tensor<8x4xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'omni.reduce_scatter' op operand and result must have the same element type and rank, found 'tensor<8x4xf32>' and 'tensor<8xf32>'}}
  %0 = omni.reduce_scatter sum %x over @mesh ["dp"] dim = 0 : tensor<8x4xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that reduce_scatter rejects a negative dimension (C3).
omni.mesh @mesh axes = ["dp"] shape = [4]
func.func @reduce_scatter_dim(%x: tensor<8x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'omni.reduce_scatter' op dim -1 is outside the rank 2}}
  %0 = omni.reduce_scatter sum %x over @mesh ["dp"] dim = -1 : tensor<8x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that reduce_scatter divides the scattered dimension by the group
// size (C4).
omni.mesh @mesh axes = ["dp", "tp"] shape = [4, 2]
func.func @reduce_scatter_size(%x: tensor<8x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'omni.reduce_scatter' op expected the gathered dimension 0 to be 8 times the scattered one, found 'tensor<8x4xf32>' and 'tensor<2x4xf32>'}}
  %0 = omni.reduce_scatter sum %x over @mesh ["dp", "tp"] dim = 0 : tensor<8x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that broadcast refers to an omni.mesh (C1).
func.func @broadcast_no_mesh(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'omni.broadcast' op mesh @mesh is not an omni.mesh}}
  %0 = omni.broadcast %x over @mesh ["dp"] root = 0 : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that broadcast names axes of the mesh (C2).
omni.mesh @mesh axes = ["dp"] shape = [4]
func.func @broadcast_axis(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'omni.broadcast' op mesh @mesh has no axis "tp"}}
  %0 = omni.broadcast %x over @mesh ["tp"] root = 0 : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that the broadcast root is a rank of the group (C3).
omni.mesh @mesh axes = ["dp"] shape = [4]
func.func @broadcast_root(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'omni.broadcast' op root 4 is outside the group of 4 ranks}}
  %0 = omni.broadcast %x over @mesh ["dp"] root = 4 : tensor<8xf32>
  return %0 : tensor<8xf32>
}
