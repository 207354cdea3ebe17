// The reference copy of test/train/data-program.mlir with a type that
// differs from its parameter's, with its own init function, so only --init
// can notice (compiler/driver/TrainerTest.cpp,
// InitChecksTheReferenceCopyToo). Its own file: state slots are
// module-wide, so data-program.mlir's 12x4 `ref.transformer.proj.weight`
// and this 4x12 one cannot share a module.

!w = tensor<12x4xf32>

func.func @init_bad_ref(%seed: tensor<i64>) -> (!w, tensor<12xf32>, tensor<4x12xf32>) {
  %w = omni.constant dense<0.0> : !w
  %b = omni.constant dense<0.0> : tensor<12xf32>
  %r = omni.constant dense<0.0> : tensor<4x12xf32>
  return %w, %b, %r : !w, tensor<12xf32>, tensor<4x12xf32>
}

func.func @step_bad_ref(%w: !w {omni.name = "transformer.proj.weight"},
                        %b: tensor<12xf32> {omni.name = "transformer.proj.bias"},
                        %rw: tensor<4x12xf32> {omni.name = "ref.transformer.proj.weight"},
                        %seed: tensor<i64>, %iteration: tensor<i64>)
    -> (!w, tensor<12xf32>, tensor<4x12xf32>) {
  return %w, %b, %rw : !w, tensor<12xf32>, tensor<4x12xf32>
}

