// Tests that the whole omnic pipeline compiles a hand-written SPMD program
// (what omni-shard produces): the module's omni.mesh becomes the meshes
// table, every collective (also inside a loop) a Collective command and
// omni.axis_index an AxisIndex command with its own arena buffer (outside
// any fusion), and a state argument with omni.sharding and
// omni.global_type a sharded state slot, padded when the group size does
// not divide the dimension (3 rows over 2 ranks: 2 rows each).
// RUN: omnic %s --emit=json | python3 %S/Inputs/collective-summary.py | FileCheck %s
// RUN: omnic %s --emit=json | FileCheck %s --check-prefix=JSON
// RUN: omnic %s -o %t.bin && omnirun %t.bin --list | FileCheck %s --check-prefix=LIST
// RUN: omnic %s --emit=fuse | FileCheck %s --check-prefix=FUSE --strict-whitespace
// One rank without a channel cannot run a program for four.
// RUN: sh -c 'omnirun %t.bin --function=step --input=4xf32=1,2,3,4; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=NOCHANNEL

// CHECK: mesh mesh dp=2 fsdp=2
// CHECK-NEXT: state w 2x4 sharded mesh=0 axes=[1] dim=0 global=3x4
// CHECK-NEXT: state b 4{{$}}
// CHECK-NEXT: @step
// CHECK-NEXT:   AllGather mesh=0 axes=[1] dim=0 2x4:F32:State -> 4x4:F32:Argument
// CHECK-NEXT:   AxisIndex mesh=0 axes=[1] -> scalar:I64:Arena
// CHECK-NEXT:   AllReduce mesh=0 axes=[0, 1] op=Mean 4:F32:Argument -> 4:F32:Arena
// CHECK-NEXT:   Broadcast mesh=0 axes=[0] root=1 4:F32:Arena -> 4:F32:Argument
// CHECK-NEXT:   ReduceScatter mesh=0 axes=[1] op=Sum dim=0 4x4:F32:Arena -> 2x4:F32:Arena
// CHECK-NEXT:   Loop
// CHECK-NEXT:     AllReduce mesh=0 axes=[0] op=Max 4:F32:Arena -> 4:F32:Arena
// CHECK-NOT: {{.}}

// JSON: "sharding": {
// JSON-NEXT: "mesh": 0,
// JSON-NEXT: "axes": [
// JSON-NEXT: 1
// JSON-NEXT: ],
// JSON-NEXT: "dim": 0,
// JSON-NEXT: "global_shape": [
// JSON-NEXT: 3,
// JSON-NEXT: 4
// JSON-NEXT: ]
// JSON: "kind_type": "AxisIndex",
// JSON-NEXT: "kind": {
// JSON-NEXT: "mesh": 0,
// JSON-NEXT: "axes": [
// JSON-NEXT: 1
// JSON-NEXT: ],
// JSON: "meshes": [
// JSON-NEXT: {
// JSON-NEXT: "name": "mesh",
// JSON-NEXT: "axes": [
// JSON-NEXT: "dp",
// JSON-NEXT: "fsdp"
// JSON-NEXT: ],
// JSON-NEXT: "shape": [
// JSON-NEXT: 2,
// JSON-NEXT: 2
// JSON-NEXT: ]

// LIST: @step(tensor<4xf32>) -> (tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>)
// LIST-NEXT: state 'w': tensor<2x4xf32> (Parameter, shard 1/2 of tensor<3x4xf32> dim 0 over 'fsdp')
// LIST-NEXT: state 'b': tensor<4xf32> (Parameter)

// NOCHANNEL: omnirun: {{.*}}: functions[0].commands[3] (Collective AllGather): the program runs on mesh 'mesh' (dp=2 x fsdp=2) of 4 ranks but the executor has no channel

// The collectives and axis_index stay outside every fusion: they are ops
// of the function (4 spaces deep) or of the loop (6), never of a fusion's
// body, which holds only the elementwise ops.
// FUSE: {{^    }}%0 = omni.all_gather %arg0
// FUSE-NEXT: {{^    }}%1 = omni.axis_index
// FUSE: {{^    }}%4 = omni.all_reduce mean %arg2
// FUSE-NEXT: {{^    }}%5 = omni.fusion(%3, %arg1, %4)
// FUSE-NOT: omni.all
// FUSE: {{^    }}%6 = omni.broadcast %5
// FUSE-NEXT: {{^    }}%7 = omni.fusion(%0)
// FUSE-NOT: omni.reduce_scatter
// FUSE: {{^      }}omni.yield %11
// FUSE-NEXT: {{^    }}}
// FUSE-NEXT: {{^    }}%8 = omni.reduce_scatter sum %7
// FUSE-NEXT: {{^    }}%9 = scf.for
// FUSE-NEXT: {{^      }}%10 = omni.all_reduce max %arg4
// FUSE-NEXT: {{^      }}%11 = omni.fusion(%10, %arg4)

omni.mesh @mesh axes = ["dp", "fsdp"] shape = [2, 2]

func.func @step(
    %w: tensor<2x4xf32> {omni.state = "w",
                         omni.sharding = #omni.sharding<@mesh, [["fsdp"], []]>,
                         omni.global_type = tensor<3x4xf32>},
    %b: tensor<4xf32> {omni.state = "b"},
    %x: tensor<4xf32>)
    -> (tensor<2x4xf32> {omni.state = "w",
                         omni.sharding = #omni.sharding<@mesh, [["fsdp"], []]>,
                         omni.global_type = tensor<3x4xf32>},
        tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %full = omni.all_gather %w over @mesh ["fsdp"] dim = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
  // This rank's row of the gathered weights: a dynamic offset from its
  // position in the fsdp group.
  %k = omni.axis_index over @mesh ["fsdp"] : tensor<i64>
  %ki = tensor.extract %k[] : tensor<i64>
  %row = arith.index_cast %ki : i64 to index
  %mine = tensor.extract_slice %full[%row, 0] [1, 4] [1, 1] : tensor<4x4xf32> to tensor<1x4xf32>
  %mine1 = omni.reshape %mine : tensor<1x4xf32> -> tensor<4xf32>
  %y = omni.add %mine1, %b : tensor<4xf32>
  %mean = omni.all_reduce mean %x over @mesh ["dp", "fsdp"] : tensor<4xf32>
  %z = omni.add %y, %mean : tensor<4xf32>
  %root = omni.broadcast %z over @mesh ["dp"] root = 1 : tensor<4xf32>
  %two = omni.constant dense<2.0> : tensor<4x4xf32>
  %g = omni.mul %full, %two : tensor<4x4xf32>
  %gs = omni.reduce_scatter sum %g over @mesh ["fsdp"] dim = 0 : tensor<4x4xf32> -> tensor<2x4xf32>
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  %acc = scf.for %i = %c0 to %c2 step %c1 iter_args(%a = %root) -> (tensor<4xf32>) {
    %m = omni.all_reduce max %a over @mesh ["dp"] : tensor<4xf32>
    %n = omni.add %m, %a : tensor<4xf32>
    scf.yield %n : tensor<4xf32>
  }
  return %gs, %full, %root, %acc : tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>
}
