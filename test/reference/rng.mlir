// RUN: omni-eval %s --function=split --input=i64=42 --input=i64=7 | FileCheck %s
// RUN: omni-eval %s --function=split --input=i64=9007199254740993 \
// RUN:   --input=i64=-3 | FileCheck %s
// RUN: omni-eval %s --function=uniform --input=i64=42 --input=i64=7 \
// RUN:   | FileCheck %s --check-prefix=UNIFORM
// RUN: omni-eval %s --function=keys --input=i64=9007199254740992 \
// RUN:   --input=i64=9007199254740993 | FileCheck %s --check-prefix=KEYS

// Counter-based random numbers: element j depends only on (key, counter,
// offset + j), so a batch drawn whole equals its two halves drawn with
// offset counters, as data-parallel ranks draw them.

// Tests that the whole 4x4 normal tensor equals rows 0-1 (offset 0) and
// rows 2-3 (offset 8) drawn separately, for a small and for an i64 key
// above 2^53 (kept exact, never rounded through a double).
// CHECK: result[0]: tensor<4x4xf32>=[[ALL:.*]]
// CHECK-NEXT: result[1]: tensor<4x4xf32>=[[ALL]]
func.func @split(%key: tensor<i64>, %counter: tensor<i64>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %zero = omni.constant dense<0> : tensor<i64>
  %eight = omni.constant dense<8> : tensor<i64>
  %whole = omni.random_normal %key, %counter, %zero : tensor<4x4xf32>
  %top = omni.random_normal %key, %counter, %zero : tensor<2x4xf32>
  %bottom = omni.random_normal %key, %counter, %eight : tensor<2x4xf32>
  %halves = omni.concat %top, %bottom dim = 0 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  return %whole, %halves : tensor<4x4xf32>, tensor<4x4xf32>
}

// Tests the same for uniform numbers, drawn as 8 elements and as 3 + 5.
// UNIFORM: result[0]: tensor<8xf32>=[[ALL:.*]]
// UNIFORM-NEXT: result[1]: tensor<8xf32>=[[ALL]]
func.func @uniform(%key: tensor<i64>, %counter: tensor<i64>) -> (tensor<8xf32>, tensor<8xf32>) {
  %zero = omni.constant dense<0> : tensor<i64>
  %three = omni.constant dense<3> : tensor<i64>
  %whole = omni.random_uniform %key, %counter, %zero : tensor<8xf32>
  %a = omni.random_uniform %key, %counter, %zero : tensor<3xf32>
  %b = omni.random_uniform %key, %counter, %three : tensor<5xf32>
  %parts = omni.concat %a, %b dim = 0 : (tensor<3xf32>, tensor<5xf32>) -> tensor<8xf32>
  return %whole, %parts : tensor<8xf32>, tensor<8xf32>
}

// Tests that keys 2^53 and 2^53 + 1, equal as doubles, draw different
// numbers.
// KEYS: result[0]: tensor<4xf32>=[[A:.*]]
// KEYS-NOT: [[A]]
func.func @keys(%k1: tensor<i64>, %k2: tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>) {
  %zero = omni.constant dense<0> : tensor<i64>
  %a = omni.random_normal %k1, %zero, %zero : tensor<4xf32>
  %b = omni.random_normal %k2, %zero, %zero : tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}
