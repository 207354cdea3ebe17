// Tests that omnic refuses what the runtime would refuse, with the loader's
// message, instead of writing a step.bin that omnirun rejects: scf.for with
// step 0 (at the loop), a tensor whose byte size overflows int64 (at the
// op), an empty module (no function to run), and loops nested deeper than
// the runtime's 16 (omnic runs the loader's checks on the bytes it writes).
// RUN: rm -f %t.bin
// RUN: sed -n '/^\/\/ STEP0-BEGIN/,/^\/\/ STEP0-END/p' %s > %t.step0.mlir
// RUN: not omnic %t.step0.mlir -o %t.bin 2>&1 | FileCheck %s --check-prefix=STEP0
// RUN: sed -n '/^\/\/ HUGE-BEGIN/,/^\/\/ HUGE-END/p' %s > %t.huge.mlir
// RUN: not omnic %t.huge.mlir -o %t.bin 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: not omnic %S/Inputs/empty.mlir -o %t.bin 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: not omnic %S/Inputs/empty.mlir --emit=json 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: not omnic %S/Inputs/loops-17-deep.mlir -o %t.bin 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: not test -e %t.bin

// STEP0: step0.mlir:5:8: error: 'scf.for' op step = 0 but it must be >= 1
// HUGE: huge.mlir:3:8: error: 'omni.add' op result #0: tensor<4611686018427387904x4xf32> has more bytes than int64 can count
// EMPTY: empty.mlir:{{[0-9]+:[0-9]+}}: error: no public function to compile: step.bin would hold nothing to run (omnirun runs the public func.func of the module)
// DEEP: omnic: {{.*}}.bin: functions[0].commands[{{[0-9]+}}]{{(.body\[[0-9]+\])+}} (Loop): Loops nest 17 deep but the limit is 16

// STEP0-BEGIN
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : index
  %r = scf.for %i = %c0 to %c3 step %c0 iter_args(%acc = %x) -> (tensor<4xf32>) {
    %n = omni.add %acc, %x : tensor<4xf32>
    scf.yield %n : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}
// STEP0-END

// HUGE-BEGIN
func.func @g(%x: tensor<4611686018427387904x4xf32>) -> tensor<4611686018427387904x4xf32> {
  %n = omni.add %x, %x : tensor<4611686018427387904x4xf32>
  return %n : tensor<4611686018427387904x4xf32>
}
// HUGE-END
