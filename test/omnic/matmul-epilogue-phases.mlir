// A matmul and its epilogue run as one command, timed in the matmul's
// phase (docs/backend.md, "Matmul epilogues"): a kernel of another phase
// is not made the epilogue, the same kernel in the matmul's phase is.
// RUN: sed -e 's/PHASE/decode/' %s > %t.decode.mlir
// RUN: sed -e 's/PHASE/rollout/' %s > %t.rollout.mlir
// RUN: omnic %t.decode.mlir --emit=json | FileCheck %s --check-prefix=OTHER
// RUN: omnic %t.rollout.mlir --emit=json | FileCheck %s --check-prefix=SAME

// OTHER:      "epilogue": false
// OTHER:      "phase": "rollout"
// OTHER:      "kind_type": "Dispatch",
// OTHER:      "phase": "decode"
// SAME:       "epilogue": true
// SAME:       "phase": "rollout"
// SAME:       "kind_type": "Dispatch",
// SAME:       "phase": "rollout"

func.func @f(%x: tensor<4x256x32xf32>, %w: tensor<64x32xf32>) -> tensor<4x256x64xf32> {
  %m = omni.matmul %x, %w transpose_rhs : tensor<4x256x32xf32>, tensor<64x32xf32> -> tensor<4x256x64xf32> loc("rollout")
  %e = omni.exp %m : tensor<4x256x64xf32> loc("PHASE")
  return %e : tensor<4x256x64xf32>
}
