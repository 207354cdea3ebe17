// --target-cpu: the host (default), portable x86-64, or a named LLVM CPU
// whose ISA features the kernels may use and step.bin records, so the loader
// can refuse a CPU that lacks them. A Haswell-class (AVX2 + FMA) build runs on
// every x86-64 machine these tests run on and gives the same values.
// RUN: omnic %s --emit=json --target-cpu=haswell | FileCheck %s --check-prefix=HASWELL
// RUN: omnic %s --emit=json --target=cpu --target-cpu=x86-64 | FileCheck %s --check-prefix=PORTABLE
// RUN: omnic %s -o %t.haswell.bin --target-cpu=haswell
// RUN: omnirun %t.haswell.bin --function main --input="4xf32=0.5 1 2 3" | FileCheck %s
// RUN: omnic %s -o %t.v2.bin --target-cpu=x86-64-v2
// RUN: omnirun %t.v2.bin --function main --input="4xf32=0.5 1 2 3" | FileCheck %s

// HASWELL: "kind": "cpu",
// HASWELL-NEXT: "cpu": "haswell",
// HASWELL-NEXT: "features": "{{.*}}+avx2,{{.*}}+fma,
// --target=cpu (the default) names the driver that runs the executables.
// PORTABLE: "kind": "cpu",
// PORTABLE-NEXT: "cpu": "x86-64",
// PORTABLE-NEXT: "features": ""{{$}}
// CHECK: result[0]: tensor<4xf32>=[1.5 2 3 4]

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %one = omni.constant dense<1.0> : tensor<4xf32>
  %y = omni.add %x, %one : tensor<4xf32>
  return %y : tensor<4xf32>
}
