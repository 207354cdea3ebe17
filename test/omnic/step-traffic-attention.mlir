// tools/step-traffic/step-traffic.py counts the cuda driver's attention as
// it runs (runtime/hal/drivers/cuda/CudaLibraries.cpp): by default the
// scores of each (batch, head) pair go through global memory.
// - rollout: a bf16 attention over 1 x 2 pairs of 128 queries and keys of
//   dimension 64: q, k, v and o are 32768 bytes each (131.1 kB); unfused,
//   each of the 2 x 128 x 128 scores is written in f32 and read by the
//   softmax, which writes it in bf16 for the second product to read: 12
//   bytes, 393.2 kB, in 3 launches (2 more than the call's one);
// - loss: its backward (q, k, v, o and dO read, dq, dk, dv written: 262.1
//   kB) writes S in f32 and reads it (8 bytes), writes P in bf16 and
//   reads it for dv (4), writes dP in f32 over S (4), reads dP and P and
//   writes dS over P (4 + 2 + 2), and reads dS for dq and for dk (4): 28
//   bytes a score, 917.5 kB, in 7 launches.
// With --attention=flash the scores stay on chip: 1 and 2 launches.
// At 1 TFLOP/s and 1 GB/s the library calls take their bytes' time
// (0.1311 and 0.2621 ms), the scores theirs (0.3932 and 0.9175 ms).
// REQUIRES: ptxas
// RUN: omnic %s --target=cuda --emit=json > %t.json
// RUN: python3 %omni_src_root/tools/step-traffic/step-traffic.py %t.json --peak-tflops=1 --peak-gbs=1 --launch-us=1 | FileCheck %s
// RUN: python3 %omni_src_root/tools/step-traffic/step-traffic.py %t.json --peak-tflops=1 --peak-gbs=1 --launch-us=1 --attention=flash | FileCheck %s --check-prefix=FLASH
// An unknown path is refused (argparse's usage, then one line).
// RUN: not python3 %omni_src_root/tools/step-traffic/step-traffic.py %t.json --attention=cudnn 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: step-traffic.py: error: argument --attention: invalid choice: 'cudnn'
// The cpu target has fused attention: nothing more.
// RUN: omnic %s --emit=json > %t.cpu.json
// RUN: python3 %omni_src_root/tools/step-traffic/step-traffic.py %t.cpu.json --peak-tflops=1 --peak-gbs=1 --launch-us=1 | FileCheck %s --check-prefix=CPU

// CHECK: rollout: 8.389 MFLOP, 524.3 kB, 3 launches (0 dispatches, 1 library calls, 0 copies); ideal 0.1311 + 0.3932 + 0.003 = 0.5273 ms
// CHECK-NEXT: loss: 20.97 MFLOP, 1.18 MB, 7 launches (0 dispatches, 1 library calls, 0 copies); ideal 0.2621 + 0.9175 + 0.007 = 1.187 ms
// CHECK: the unfused attention's scores (in the bytes above): 1.311 MB, 1.311 ms

// FLASH: rollout: 8.389 MFLOP, 131.1 kB, 1 launches (0 dispatches, 1 library calls, 0 copies); ideal 0.1311 + 0 + 0.001 = 0.1321 ms
// FLASH-NEXT: loss: 20.97 MFLOP, 262.1 kB, 2 launches (0 dispatches, 1 library calls, 0 copies); ideal 0.2621 + 0 + 0.002 = 0.2641 ms
// FLASH-NOT: scores

// CPU: rollout: 8.389 MFLOP, 131.1 kB, 1 launches
// CPU-NEXT: loss: 20.97 MFLOP, 262.1 kB, 1 launches
// CPU-NOT: scores

func.func @f(%q: tensor<1x2x128x64xbf16>, %k: tensor<1x2x128x64xbf16>,
             %v: tensor<1x2x128x64xbf16>, %do: tensor<1x2x128x64xbf16>)
    -> (tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>) {
  %o = omni.attention %q, %k, %v : (tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>) -> tensor<1x2x128x64xbf16> loc("rollout")
  %g:3 = omni.attention_grad %q, %k, %v, %o, %do : (tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>) -> (tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>) loc("loss")
  return %o, %g#0, %g#1, %g#2 : tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>
}
