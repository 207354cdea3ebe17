// Tests omnic's user-facing errors: one clear line (with file:line:col where
// there is a place) and exit code 1, never a crash.
// RUN: sh -c 'omnic %s --emit=bogus; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=EMIT
// RUN: sh -c 'omnic %s; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=OUT
// RUN: sh -c 'omnic %s -o %t.bin -O7; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=OPT
// RUN: sh -c 'omnic %s -o %t.bin --target-cpu=pentium9; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=CPU
// RUN: sh -c 'omnic %s -o %t.bin --target=cuda9; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: sh -c 'omnic %s --emit=kernels --target=; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=NOTARGET
// RUN: sh -c 'omnic %s.missing -o %t.bin; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: sh -c 'omnic %s -o %t.bin; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=ENTRY
// RUN: sh -c 'omnic %S/Inputs/unverified.mlir -o %t.bin; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=VERIFY

// EMIT: omnic: --emit=bogus: expected input, cleanup, autodiff, decompose, shard, fuse, plan-memory, kernels, llvm, ptx or json
// OUT: omnic: no output file: pass -o <file>.bin (or --emit=<stage>)
// OPT: omnic: -O7: expected 0 to 3
// CPU: omnic: --target-cpu=pentium9: unknown CPU; expected host, x86-64 or an LLVM x86 CPU name (haswell, x86-64-v3, skylake-avx512, znver4, ...)
// TARGET: omnic: --target=cuda9: unknown target; expected cpu, cuda{{$}}
// NOTARGET: omnic: --target=: unknown target; expected cpu, cuda{{$}}
// MISSING: omnic: cannot open input file '{{.*}}errors.mlir.missing'
// ENTRY: errors.mlir:[[@LINE+1]]:1: error: 'func.func' op argument #1 has type 'index'; public functions are entry points and take tensors only (make helpers private so they are inlined)
func.func @step(%x: tensor<4xf32>, %i: index) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
// VERIFY: unverified.mlir:{{[0-9]+}}:{{[0-9]+}}: error: 'omni.matmul' op contraction dimensions differ
// RUN: sh -c 'omnic %S/Inputs/scf-if.mlir -o %t.bin; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=IF
// IF: scf-if.mlir:3:8: error: 'scf.if' op cannot be executed by the runtime yet
// IF-NOT: see current operation
// RUN: sh -c 'omnic %S/Inputs/strided-slice.mlir -o %t.bin; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=SLICE
// SLICE: strided-slice.mlir:6:8: error: 'tensor.extract_slice' op is not contiguous in memory
