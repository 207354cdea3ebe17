// Tests omnic's metadata table (step.fbs MetadataEntry, docs/backend.md
// "Metadata"): the module's omni.metadata string dictionary becomes the
// table, sorted by key, that omnirun --list prints one line per key (a
// value's line breaks as \n); a value that is not a string is one line at
// the module, exit code 1.
// RUN: omnic %s -o %t.bin
// RUN: omnirun %t.bin --list | FileCheck %s
// RUN: sh -c 'omnic %S/Inputs/metadata-not-string.mlir -o %t.bad; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=NOTSTRING
// RUN: sh -c 'omnic %S/Inputs/metadata-not-dict.mlir -o %t.bad; test $? -eq 1' 2>&1 | FileCheck %s --check-prefix=NOTDICT

// CHECK: @f(tensor<4xf32>) -> (tensor<4xf32>)
// CHECK-NEXT: metadata 'a_key': first
// CHECK-NEXT: metadata 'model': two\nlines
// CHECK-NEXT: metadata 'z': {"json": [1, 2]}
// NOTSTRING: metadata-not-string.mlir:2:1: error: omni.metadata key 'rank' has value 4 : i64; expected a string
// NOTDICT: metadata-not-dict.mlir:2:1: error: omni.metadata = "sd3"; expected a dictionary of strings {key = "value", ...}

module attributes {omni.metadata = {z = "{\"json\": [1, 2]}", model = "two\nlines", a_key = "first"}} {
  func.func @f(%x: tensor<4xf32> {omni.name = "x"}) -> tensor<4xf32> {
    %y = omni.add %x, %x : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
