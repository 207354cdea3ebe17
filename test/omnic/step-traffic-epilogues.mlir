// step-traffic.py --epilogues: the most that fusing a matmul with the
// kernel right after it that reads its product could save (the product
// written and read back, the kernel's launch), counted by hand.
// - loss: %p = x y (64x64, f32: 16384 bytes) and the kernel adding %b to
//   it: 2 x 16384 bytes and 1 launch; at 1 GB/s and 1 us a launch
//   0.03277 ms + 0.001 ms;
// - rollout: a matmul whose product the next kernel does not read (it
//   adds %b to %x) counts nothing, and neither does the matmul whose
//   product is only returned.
// RUN: omnic %s --emit=json > %t.json
// RUN: python3 %omni_src_root/tools/step-traffic/step-traffic.py %t.json --peak-tflops=1 --peak-gbs=1 --launch-us=1 --epilogues | FileCheck %s
// RUN: python3 %omni_src_root/tools/step-traffic/step-traffic.py %t.json | FileCheck %s --check-prefix=PLAIN

// CHECK: rollout:
// CHECK-NOT: matmul epilogues
// CHECK: loss:
// CHECK-NEXT: matmul epilogues: 1; fused into the matmuls they would save at most 32.77 kB and 1 launches: 0.03277 + 0.001 = 0.03377 ms
// CHECK: total:
// CHECK-NEXT: matmul epilogues: 1;

// PLAIN-NOT: matmul epilogues

func.func @f(%x: tensor<64x64xf32>, %y: tensor<64x64xf32>, %b: tensor<64x64xf32>)
    -> (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) {
  %q = omni.matmul %x, %y : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32> loc("rollout")
  %s = omni.add %x, %b : tensor<64x64xf32> loc("rollout")
  %p = omni.matmul %s, %y : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32> loc("loss")
  %z = omni.add %p, %b : tensor<64x64xf32> loc("loss")
  return %q, %z, %s : tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>
}
