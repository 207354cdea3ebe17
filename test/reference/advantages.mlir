// RUN: omni-eval %s --function=advantages --input=4xf32=1,3,0,2 | FileCheck %s
// RUN: omni-eval %s --function=advantages --input=4xf32=1,3,0,2 --precision=f64 \
// RUN:   | FileCheck %s --check-prefix=F64

// group_advantages against docs/flowgrpo-math.md section 8: rewards [1, 3, 0, 2] in
// groups [a, a, b, b].

// Tests the three option sets in float32 and, with more digits, in the
// float64 oracle: global std with ddof 0 gives +-0.8943472
// (signs -, +, -, +); per-group std gives +-0.9999000; norm_by_std = false
// gives [-1, 1, -1, 1].
// CHECK: result[0]: tensor<4xf32>=[-0.894347191 0.894347191 -0.894347191 0.894347191]
// CHECK: result[1]: tensor<4xf32>=[-0.999899983 0.999899983 -0.999899983 0.999899983]
// CHECK: result[2]: tensor<4xf32>=[-1 1 -1 1]
// F64: result[0]: tensor<4xf32>=[-0.894347198{{[0-9]+}} 0.894347198{{[0-9]+}} -0.894347198{{[0-9]+}} 0.894347198{{[0-9]+}}]
// F64: result[1]: tensor<4xf32>=[-0.999900009{{[0-9]+}} 0.999900009{{[0-9]+}} -0.999900009{{[0-9]+}} 0.999900009{{[0-9]+}}]
// F64: result[2]: tensor<4xf32>=[-1 1 -1 1]
func.func @advantages(%r: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %global = omni.group_advantages %r {group_size = 2} : tensor<4xf32>
  %group = omni.group_advantages %r {group_size = 2, global_std = false} : tensor<4xf32>
  %plain = omni.group_advantages %r {group_size = 2, norm_by_std = false} : tensor<4xf32>
  return %global, %group, %plain : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
