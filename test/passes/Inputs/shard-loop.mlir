
// Tests a denoise-like loop with per-step gathers: the loop carries the
// split batch, the weight is gathered inside the body before its use, and
// the noise drawn for the whole batch is drawn for the rank's rows only
// (offset moved by the block's first element).
module attributes {omni.shard_gather = "per-step"} {
omni.mesh @mesh axes = ["fsdp"] shape = [2]
func.func @loop(%w: tensor<4x4xf32> {omni.state = "w", omni.sharding = #omni.sharding<@mesh, [["fsdp"], []]>},
                %seed: tensor<i64>, %x: tensor<6x4xf32>)
    -> (tensor<4x4xf32> {omni.state = "w", omni.sharding = #omni.sharding<@mesh, [["fsdp"], []]>}, tensor<6x4xf32>)
{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %xs = omni.shard %x : tensor<6x4xf32> to #omni.sharding<@mesh, [["fsdp"], []]>
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%a = %xs) -> (tensor<6x4xf32>) {
    %zero = omni.constant dense<0> : tensor<i64>
    %n = omni.random_normal %seed, %zero, %zero : tensor<6x4xf32>
    %v = omni.matmul %a, %w : tensor<6x4xf32>, tensor<4x4xf32> -> tensor<6x4xf32>
    %next = omni.add %v, %n : tensor<6x4xf32>
    scf.yield %next : tensor<6x4xf32>
  }
  return %w, %r : tensor<4x4xf32>, tensor<6x4xf32>
}
}
