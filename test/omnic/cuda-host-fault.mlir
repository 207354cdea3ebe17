// A GPU kernel that touches a wrong address fails asynchronously: the
// stream reports it at the next synchronization, which cannot say which
// command it was. The host model's OMNI_HOST_CUDA_FAULT=N fails the N-th
// compiled kernel run that way (docs/backend-cuda.md, "The host model").
// - plainly, the cuda driver's one line says that the fault is an earlier
//   kernel's and how to find it;
// - under CUDA_LAUNCH_BLOCKING=1 (the model runs each command when it is
//   enqueued and answers with its failure, as a GPU's driver does) the
//   failing command is named by its place and kernel; inside a graph, the
//   graph's region is named, and --graphs off names the command;
// - the failure is sticky: the run ends there, with exit 1.
// (A training run's --profile names it too: ExecutorTest's
// AnAsynchronousFailureIsNamedByItsCommandUnderAProfile.)
// REQUIRES: cuda-host-model
// RUN: omnic --target=cuda --cuda-host-kernels %s -o %t.bin
// RUN: %host_cuda omnirun %t.bin --gpus 1 --function f --input=4xf32=1,2,3,4 | FileCheck %s --check-prefix=OK
// RUN: %host_cuda OMNI_HOST_CUDA_FAULT=3 not omnirun %t.bin --gpus 1 --function f --input=4xf32=1,2,3,4 2>&1 | FileCheck %s --check-prefix=PLAIN
// RUN: %host_cuda OMNI_HOST_CUDA_FAULT=1 CUDA_LAUNCH_BLOCKING=1 not omnirun %t.bin --gpus 1 --function f --input=4xf32=1,2,3,4 2>&1 | FileCheck %s --check-prefix=FIRST
// RUN: %host_cuda OMNI_HOST_CUDA_FAULT=3 CUDA_LAUNCH_BLOCKING=1 not omnirun %t.bin --gpus 1 --function f --input=4xf32=1,2,3,4 2>&1 | FileCheck %s --check-prefix=GRAPH
// RUN: %host_cuda OMNI_HOST_CUDA_FAULT=3 CUDA_LAUNCH_BLOCKING=1 not omnirun %t.bin --gpus 1 --graphs off --function f --input=4xf32=1,2,3,4 2>&1 | FileCheck %s --check-prefix=LOOP

// (1 2 3 4)^2 + 3 (1 2 3 4)
// OK: result[0]: tensor<4xf32>=[4 10 18 28]

// PLAIN: omnirun: cuda:0: a command on the stream failed: CUDA_ERROR_ILLEGAL_ADDRESS (reported by the host model of libcuda) (a fault of a kernel run before this call, reported late; with CUDA_LAUNCH_BLOCKING=1 each launch reports its own)
// PLAIN-NOT: result

// FIRST: omnirun: {{.*}}.bin: functions[0].commands[{{[0-9]+}}] (Dispatch omni_kernel_0, loc("first")): cuda:0: launching 'omni_kernel_0_0' of executable 'kernels': CUDA_ERROR_ILLEGAL_ADDRESS (reported by the host model of libcuda){{$}}
// GRAPH: omnirun: {{.*}}.bin: functions[0].commands[{{[0-9]+}}] (Loop), run as a graph: cuda:0: cuGraphLaunch: CUDA_ERROR_ILLEGAL_ADDRESS (reported by the host model of libcuda) (--graphs off runs its commands one by one)
// LOOP: omnirun: {{.*}}.bin: functions[0].commands[{{[0-9]+}}].body[0] (Dispatch omni_kernel_1, loc("loop")): cuda:0: launching 'omni_kernel_1_0' of executable 'kernels': CUDA_ERROR_ILLEGAL_ADDRESS

func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %b = omni.mul %a, %a : tensor<4xf32> loc("first")
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%acc = %b) -> tensor<4xf32> {
    %s = omni.add %acc, %a : tensor<4xf32> loc("loop")
    scf.yield %s : tensor<4xf32>
  } loc("loop")
  return %r : tensor<4xf32>
}
