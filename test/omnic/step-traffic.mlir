// tools/step-traffic/step-traffic.py on a small program, the counts by
// hand (docs/performance.md, "A traffic model of the iteration"); the cuda
// target's launches: step-traffic-cuda.test.
// - rollout: a loop of 3 trips adding two 1000-element f32 tensors: 3
//   dispatches of 3 x 4000 bytes, and the copy of %a into the loop's slot
//   (%a is not donated), 4000 bytes read and written: 44 kB, 4 launches;
// - loss: a 64x64x64 matmul: 2 x 64^3 = 524288 FLOPs, 3 x 16384 bytes;
// - decode: 1000 normal random numbers written: 4 kB, 1 launch.
// At 1 TFLOP/s, 1 GB/s and 1 us a launch: rollout 0 + 44 us + 4 us =
// 0.048 ms; loss: the matmul the larger of 0.5243 us of FLOPs and 49.15 us
// of bytes, + 0 + 1 us = 0.05015 ms; decode 0 + 4 us + 1 us = 0.005 ms.
// RUN: omnic %s --emit=json > %t.json
// RUN: python3 %omni_src_root/tools/step-traffic/step-traffic.py %t.json --peak-tflops=1 --peak-gbs=1 --launch-us=1 --top=1 | FileCheck %s
// RUN: python3 %omni_src_root/tools/step-traffic/step-traffic.py - --function=f < %t.json | FileCheck %s --check-prefix=DEFAULT
// RUN: not python3 %omni_src_root/tools/step-traffic/step-traffic.py %t.json --function=g 2>&1 | FileCheck %s --check-prefix=NOFN
// RUN: echo '{}' | not python3 %omni_src_root/tools/step-traffic/step-traffic.py - 2>&1 | FileCheck %s --check-prefix=NOTSTEP

// CHECK: peaks: 1 TFLOP/s, 1 GB/s, 1 us per launch
// CHECK-NEXT: @f
// CHECK-NEXT: rollout: 0 FLOP, 44 kB, 4 launches (3 dispatches, 0 library calls, 1 copies); ideal 0 + 0.044 + 0.004 = 0.048 ms
// CHECK-NEXT: loss: 524.3 kFLOP, 49.15 kB, 1 launches (0 dispatches, 1 library calls, 0 copies); ideal 0.04915 + 0 + 0.001 = 0.05015 ms
// CHECK-NEXT: decode: 0 FLOP, 4 kB, 1 launches (0 dispatches, 0 library calls, 0 copies); ideal 0 + 0.004 + 0.001 = 0.005 ms
// CHECK-NEXT: total: 524.3 kFLOP, 97.15 kB, 6 launches
// CHECK-NEXT: fused kernels moving the most bytes:
// CHECK-NEXT: omni_kernel_0 (rollout): 3 x 12 kB, 1 launch(es) each

// The default peaks are an H200's.
// DEFAULT: peaks: 989 TFLOP/s, 4800 GB/s, 2 us per launch

// NOFN: step-traffic.py: no function 'g' in {{.*}} (it has: f)
// NOTSTEP: step-traffic.py: -: not omnic --emit=json output

func.func @f(%a: tensor<1000xf32>, %b: tensor<1000xf32>, %x: tensor<64x64xf32>,
             %y: tensor<64x64xf32>, %key: tensor<i64>, %ctr: tensor<i64>)
    -> (tensor<1000xf32>, tensor<64x64xf32>, tensor<1000xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%acc = %a) -> tensor<1000xf32> {
    %s = omni.add %acc, %b : tensor<1000xf32> loc("rollout")
    scf.yield %s : tensor<1000xf32>
  } loc("rollout")
  %m = omni.matmul %x, %y : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32> loc("loss")
  %n = omni.random_normal %key, %ctr, %ctr : tensor<1000xf32> loc("decode")
  return %r, %m, %n : tensor<1000xf32>, tensor<64x64xf32>, tensor<1000xf32>
}
