// RUN: not omni-eval %s --function=add --input=3x2xf32=1,2,3,4,5,6 \
// RUN:   --input=2x3xf32=1,2,3,4,5,6 2>&1 | FileCheck %s --check-prefix=SHAPE
// RUN: not omni-eval %s --function=add --input=2x3xi32=1,2,3,4,5,6 \
// RUN:   --input=2x3xf32=1,2,3,4,5,6 2>&1 | FileCheck %s --check-prefix=DTYPE
// RUN: not omni-eval %s --function=add --input=2x3xf32=1,2,3,4,5,6 2>&1 \
// RUN:   | FileCheck %s --check-prefix=ARITY
// RUN: not omni-eval %s --function=missing 2>&1 \
// RUN:   | FileCheck %s --check-prefix=UNKNOWN
// RUN: not omni-eval %s --function=add --input=2x3xf32=1,2,3 \
// RUN:   --input=2x3xf32=1,2,3,4,5,6 2>&1 | FileCheck %s --check-prefix=INLINE
// RUN: printf 'PK\003\004 not numpy' > %t.bad.npy
// RUN: not omni-eval %s --function=add --input=@%t.bad.npy \
// RUN:   --input=2x3xf32=1,2,3,4,5,6 2>&1 | FileCheck %s --check-prefix=MAGIC
// RUN: omni-eval %s --function=add --input=2x3xf32=1,2,3,4,5,6 \
// RUN:   --input=2x3xf32=1,2,3,4,5,6 --output=@%t.good.npy
// RUN: head -c 140 %t.good.npy > %t.short.npy
// RUN: not omni-eval %s --function=add --input=@%t.short.npy \
// RUN:   --input=2x3xf32=1,2,3,4,5,6 2>&1 | FileCheck %s --check-prefix=TRUNCATED
// RUN: not omni-eval %s --function=add --input=@%t.missing.npy \
// RUN:   --input=2x3xf32=1,2,3,4,5,6 2>&1 | FileCheck %s --check-prefix=NOFILE
// RUN: not omni-eval %s --function=add --input=2x3xf32=1,2,3,4,5,6 \
// RUN:   --input=2x3xf32=1,2,3,4,5,6 --output=@%t.a.npy --output=@%t.b.npy 2>&1 \
// RUN:   | FileCheck %s --check-prefix=OUTPUTS
// RUN: not omni-eval %s --function=add --input=2x3xf32=1,2,3,4,5,6 \
// RUN:   --input=2x3xf32=1,2,3,4,5,6 --output=out.npy 2>&1 \
// RUN:   | FileCheck %s --check-prefix=OUTFORM
// RUN: not omni-eval %S/Inputs/invalid.mlir --function=f 2>&1 \
// RUN:   | FileCheck %s --check-prefix=VERIFY
// RUN: not omni-eval %s --function=div_by_zero --input=2xi32=7,1 \
// RUN:   --input=2xi32=1,0 2>&1 | FileCheck %s --check-prefix=DIVZERO
// RUN: not omni-eval %s --function=gradient --input=4xf32=1,2,3,4 2>&1 \
// RUN:   | FileCheck %s --check-prefix=GRAD
// RUN: not omni-eval %s --function=gather --input=2x4xf32=1,2,3,4,5,6,7,8 2>&1 \
// RUN:   | FileCheck %s --check-prefix=COLLECTIVE
// RUN: not omni-eval %s --function=reward --input=1x3x2x2xf32=0,0,0,0,0,0,0,0,0,0,0,0 2>&1 \
// RUN:   | FileCheck %s --check-prefix=HOSTFN
// RUN: not omni-eval %s --function=add --precision=f16 2>&1 \
// RUN:   | FileCheck %s --check-prefix=PRECISION

// omni-eval's user errors: each is one line on stderr and exit code 1.

// SHAPE: omni-eval: argument #0 of @add: expected tensor<2x3xf32>, found tensor<3x2xf32>
// DTYPE: omni-eval: argument #0 of @add: expected tensor<2x3xf32>, found tensor<2x3xi32>
// ARITY: omni-eval: function @add takes 2 arguments, found 1
// UNKNOWN: omni-eval: no function @missing in the module (functions: @add, @div_by_zero, @gradient, @loss, @gather, @reward)
// INLINE: omni-eval: --input #0: inline tensor '2x3xf32=1,2,3': expected 6 values for shape 2x3, found 3
// MAGIC: omni-eval: --input #0: {{.*}}bad.npy: not a .npy file: expected the magic string "\x93NUMPY", found "PK\x03\x04 n"
// TRUNCATED: omni-eval: --input #0: {{.*}}short.npy: truncated .npy data: expected 24 bytes of '<f4' for shape (2, 3), found 12
// NOFILE: omni-eval: --input #0: {{.*}}missing.npy: cannot open the .npy file for reading
// OUTPUTS: omni-eval: @add returns 1 results but 2 --output were given
// OUTFORM: omni-eval: --output #0 must be @file.npy or -, found 'out.npy'
// VERIFY: invalid.mlir:3:8: error: 'omni.reshape' op cannot reshape 2x3 (6 elements) to 4 (4 elements)
// PRECISION: for the --precision option: Cannot find option named 'f16'!
func.func @add(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %c = omni.add %a, %b : tensor<2x3xf32>
  return %c : tensor<2x3xf32>
}

// DIVZERO: omni-eval: {{.*}}errors.mlir:[[@LINE+2]]:8: 'omni.div' divides by zero at element 1
func.func @div_by_zero(%a: tensor<2xi32>, %b: tensor<2xi32>) -> tensor<2xi32> {
  %c = omni.div %a, %b : tensor<2xi32>
  return %c : tensor<2xi32>
}

// GRAD: omni-eval: {{.*}}errors.mlir:[[@LINE+2]]:9: 'omni.grad' must be expanded by omni-autodiff first
func.func @gradient(%w: tensor<4xf32>) -> tensor<4xf32> {
  %gw = omni.grad @loss(%w) wrt = [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %gw : tensor<4xf32>
}
func.func @loss(%w: tensor<4xf32>) -> tensor<f32> {
  %s = omni.reduce sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// COLLECTIVE: omni-eval: {{.*}}errors.mlir:[[@LINE+3]]:8: 'omni.all_gather' runs over a group of 4 ranks (mesh @mesh); the single-process reference evaluator supports only groups of 1 rank
omni.mesh @mesh axes = ["dp"] shape = [4]
func.func @gather(%x: tensor<2x4xf32>) -> tensor<8x4xf32> {
  %g = omni.all_gather %x over @mesh ["dp"] dim = 0 : tensor<2x4xf32> -> tensor<8x4xf32>
  return %g : tensor<8x4xf32>
}

// HOSTFN: omni-eval: {{.*}}errors.mlir:[[@LINE+2]]:8: 'omni.host_call' calls unknown host function 'aesthetic_score' (registered: brightness, jpeg_compressibility, jpeg_incompressibility)
func.func @reward(%img: tensor<1x3x2x2xf32>) -> tensor<1xf32> {
  %r = omni.host_call "aesthetic_score"(%img) : (tensor<1x3x2x2xf32>) -> tensor<1xf32>
  return %r : tensor<1xf32>
}
