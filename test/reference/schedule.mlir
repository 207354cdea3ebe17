// RUN: omni-eval %s --function=sd35_n10 | FileCheck %s --check-prefix=N10
// RUN: omni-eval %s --function=sd35_n40 | FileCheck %s --check-prefix=N40
// RUN: omni-eval %s --function=last_timesteps | FileCheck %s --check-prefix=LAST

// The SD3.5 schedule (static shift 3) of docs/flowgrpo-math.md section 8. The checks
// pin the float32 values exactly (9 significant digits identify a float32);
// the documented values, which they match to about 1e-7, are in the
// comments.

// Tests the N = 10 timesteps: 1000.0, 960.1293335, 913.3489990, 857.6923218,
// 790.3682861, 707.2785034, 602.1505737, 464.8760376, 278.0487976, 8.9285717.
// N10: result[0]: tensor<10xf32>=[1000 960.129333 913.348999 857.692322 790.368286 707.278503 602.150574 464.876038 278.048798 8.9285717]
// Sigmas are the timesteps / 1000 with a terminal 0.
// N10: result[1]: tensor<11xf32>=[1 0.960129321 0.913348973 0.857692301 0.790368259 0.70727849 0.602150559 0.464876026 0.278048784 0.00892857183 0]
func.func @sd35_n10() -> (tensor<10xf32>, tensor<11xf32>) {
  %sigmas, %timesteps = omni.flow_schedule static_shift steps = 10 {shift = 3.0} : tensor<11xf32>, tensor<10xf32>
  return %timesteps, %sigmas : tensor<10xf32>, tensor<11xf32>
}

// Tests the first three N = 40 timesteps: 1000.0, 991.33087, 982.35577.
// N40: result[0]: tensor<3xf32>=[1000 991.330872 982.355774]
func.func @sd35_n40() -> tensor<3xf32> {
  %sigmas, %timesteps = omni.flow_schedule static_shift steps = 40 : tensor<41xf32>, tensor<40xf32>
  %first = omni.slice %timesteps [0:3:1] : tensor<40xf32> -> tensor<3xf32>
  return %first : tensor<3xf32>
}

// Tests that the last timestep is 8.928572 for any N >= 2 (N = 2, 10, 40,
// 1000).
// LAST: result[0]: tensor<4xf32>=[8.9285717 8.9285717 8.9285717 8.9285717]
func.func @last_timesteps() -> tensor<4xf32> {
  %s1, %t1 = omni.flow_schedule static_shift steps = 2 : tensor<3xf32>, tensor<2xf32>
  %l1 = omni.slice %t1 [1:2:1] : tensor<2xf32> -> tensor<1xf32>
  %s2, %t2 = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
  %s3, %t3 = omni.flow_schedule static_shift steps = 40 : tensor<41xf32>, tensor<40xf32>
  %s4, %t4 = omni.flow_schedule static_shift steps = 1000 : tensor<1001xf32>, tensor<1000xf32>
  %l2 = omni.slice %t2 [9:10:1] : tensor<10xf32> -> tensor<1xf32>
  %l3 = omni.slice %t3 [39:40:1] : tensor<40xf32> -> tensor<1xf32>
  %l4 = omni.slice %t4 [999:1000:1] : tensor<1000xf32> -> tensor<1xf32>
  %all = omni.concat %l1, %l2, %l3, %l4 dim = 0 : (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4xf32>
  return %all : tensor<4xf32>
}
