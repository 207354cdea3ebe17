// Tests omnic's hyper-parameter table (step.fbs HyperParam, docs/recipes.md
// section 11): omni.hparam arguments become one row per name, sorted, that
// omnirun --list prints; malformed ones are one line at the function, exit
// code 1, never a crash.
// RUN: omnic %s -o %t.bin
// RUN: omnirun %t.bin --list | FileCheck %s
// RUN: sh -c 'omnic %S/Inputs/hparam-not-dict.mlir -o %t.bad; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=DICT
// RUN: sh -c 'omnic %S/Inputs/hparam-f32.mlir -o %t.bad; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=F32
// RUN: sh -c 'omnic %S/Inputs/hparam-range.mlir -o %t.bad; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: sh -c 'omnic %S/Inputs/hparam-outside.mlir -o %t.bad; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=OUTSIDE
// RUN: sh -c 'omnic %S/Inputs/hparam-conflict.mlir -o %t.bad; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=CONFLICT

// CHECK: @scale(tensor<4xf32>, tensor<f64>, tensor<f64>) -> (tensor<4xf32>)
// CHECK-NEXT: @shift(tensor<4xf32>, tensor<f64>) -> (tensor<4xf32>)
// CHECK-NEXT: hparam 'alpha': default 0.5, range [0, 1] (runtime: --set alpha=<value>)
// CHECK-NEXT: hparam 'gamma': default 2, range (0, inf) (runtime: --set gamma=<value>)
// DICT: hparam-not-dict.mlir:2:1: error: @step: argument #0 has omni.hparam = 1.000000e+00 : f64; expected {default = <f64>, range = "<interval>"}
// F32: hparam-f32.mlir:2:1: error: @step: argument #0 has omni.hparam but is 'tensor<f32>' named 'lr'; expected a named tensor<f64> input (not state)
// RANGE: hparam-range.mlir:2:1: error: @step: argument #0 has omni.hparam range "0 to inf"; expected an interval such as "[0, inf)"
// OUTSIDE: hparam-outside.mlir:2:1: error: @step: argument #0 has omni.hparam default 0.000000e+00 outside its range (0, inf)
// CONFLICT: hparam-conflict.mlir:5:1: error: @b: argument #0 has hyper-parameter 'lr' with default 2.000000e-03 and range [0, inf) but another argument has 1.000000e-03 and [0, inf); expected one default and range per name

func.func @scale(%x: tensor<4xf32> {omni.name = "x"},
                 %g: tensor<f64> {omni.name = "gamma", omni.hparam = {default = 2.0 : f64, range = "(0, inf)"}},
                 %a: tensor<f64> {omni.name = "alpha", omni.hparam = {default = 0.5 : f64, range = "[0, 1]"}}) -> tensor<4xf32> {
  %g32 = omni.cast %g : tensor<f64> -> tensor<f32>
  %a32 = omni.cast %a : tensor<f64> -> tensor<f32>
  %s = omni.mul %g32, %a32 : tensor<f32>
  %b = omni.broadcast_in_dim %s, dims = [] : tensor<f32> -> tensor<4xf32>
  %y = omni.mul %x, %b : tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func @shift(%x: tensor<4xf32> {omni.name = "x"},
                 %g: tensor<f64> {omni.name = "gamma", omni.hparam = {default = 2.0 : f64, range = "(0, inf)"}}) -> tensor<4xf32> {
  %g32 = omni.cast %g : tensor<f64> -> tensor<f32>
  %b = omni.broadcast_in_dim %g32, dims = [] : tensor<f32> -> tensor<4xf32>
  %y = omni.add %x, %b : tensor<4xf32>
  return %y : tensor<4xf32>
}
