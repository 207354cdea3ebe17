// A step.bin whose bytes changed after omnic wrote it (issue 11): the
// checksums make every change a one-line error that names the damaged part
// (or says the file is corrupt), never a crash, a kernel run against the
// wrong buffers, or silently different numbers.
// RUN: omnic %s -o %t.bin
// RUN: omnirun %t.bin --function=f --input=4xf32=1,1,1,1 | FileCheck %s --check-prefix=OK
// OK: result[0]: tensor<4xf32>=[2.5 3.5 4.5 5.5]

// What omnic records: the kernel's signature (two f32[4] operands, one
// result, grid 1) and a checksum per section.
// RUN: omnic %s --emit=json | FileCheck %s --check-prefix=JSON
// JSON:      "signatures": [
// JSON-NEXT:   {
// JSON-NEXT:     "operands": [
// JSON-NEXT:       {
// JSON-NEXT:         "bytes": 16,
// JSON-NEXT:         "dtype": "F32"
// JSON-NEXT:       },
// JSON-NEXT:       {
// JSON-NEXT:         "bytes": 16,
// JSON-NEXT:         "dtype": "F32"
// JSON-NEXT:       }
// JSON-NEXT:     ],
// JSON-NEXT:     "results": [
// JSON-NEXT:       {
// JSON-NEXT:         "bytes": 16,
// JSON-NEXT:         "dtype": "F32"
// JSON-NEXT:       }
// JSON-NEXT:     ],
// JSON-NEXT:     "grid": 1,
// JSON-NEXT:     "num_scalars": 0
// JSON:      "integrity": {
// JSON-NEXT:   "file": {
// JSON-NEXT:     "value": {{[0-9]+}}
// JSON:        "executables": [
// JSON-NEXT:     {{[0-9]+}}
// JSON:        "constants": [
// JSON-NEXT:     {{[0-9]+}}

// Inside the kernels' code.
// RUN: python3 %S/Inputs/flip-byte.py %t.bin %t.code.bin elf+200
// RUN: not omnirun %t.code.bin --list 2>&1 | FileCheck %s --check-prefix=CODE
// CODE: omnirun: {{.*}}.code.bin: executables[0].data ({{[0-9]+}} bytes): CRC-32C is 0x{{[0-9a-f]+}} but integrity.executables[0] records 0x{{[0-9a-f]+}}: the file is corrupt (copy it again or recompile it)

// Inside the constant [1.5, 2.5, 3.5, 4.5] (the last byte of 4.5: a
// different number, not a crash).
// RUN: python3 %S/Inputs/flip-byte.py %t.bin %t.const.bin hex:0000c03f000020400000604000009040+15
// RUN: not omnirun %t.const.bin --function=f --input=4xf32=1,1,1,1 2>&1 | FileCheck %s --check-prefix=CONST
// CONST: omnirun: {{.*}}.const.bin: constants[0].data (16 bytes): CRC-32C is {{.*}}: the file is corrupt (copy it again or recompile it)

// In the metadata: the function's name "f" (a string the verifier cannot
// judge), near the start and near the end of the file.
// RUN: python3 %S/Inputs/flip-byte.py %t.bin %t.meta.bin hex:010000006600+4
// RUN: not omnirun %t.meta.bin --list 2>&1 | FileCheck %s --check-prefix=META
// META: omnirun: {{.*}}.meta.bin: CRC-32C of the file's {{[0-9]+}} bytes is 0x{{[0-9a-f]+}} but integrity.file records 0x{{[0-9a-f]+}}: the file is corrupt (copy it again or recompile it)
// RUN: python3 %S/Inputs/flip-byte.py %t.bin %t.start.bin 9
// RUN: not omnirun %t.start.bin --list 2>&1 | FileCheck %s --check-prefix=ANY
// RUN: python3 %S/Inputs/flip-byte.py %t.bin %t.end.bin -3
// RUN: not omnirun %t.end.bin --list 2>&1 | FileCheck %s --check-prefix=ANY
// ANY: omnirun: {{.*}}.bin: {{.*}}: the file is corrupt (copy it again or recompile it)

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = omni.constant dense<[1.5, 2.5, 3.5, 4.5]> : tensor<4xf32>
  %y = omni.add %x, %c : tensor<4xf32>
  return %y : tensor<4xf32>
}
