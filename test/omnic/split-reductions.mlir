// A sum over the rows of a [2048, 64] tensor runs as 16 groups of 128 rows
// (omni-split-reductions), each summed in f64, on several threads, and the
// partial sums stay f64: in every column, group g starts with (-1)^g 2^24
// and has 127 elements of 0.25, so the exact sum is 16 * 31.75 = 508. Had
// the partial sums been rounded to f32 (spacing 2 above 2^24, 1 below),
// each would have been +-2^24 + 32 and the sum 512.
// RUN: omnic %s --emit=json | FileCheck %s --check-prefix=GRID
// RUN: omnic %s -o %t.bin
// RUN: omnirun %t.bin --function main --threads=1 > %t.1
// RUN: omnirun %t.bin --function main --threads=2 > %t.2
// RUN: FileCheck %s < %t.1
// RUN: diff %t.1 %t.2

// The first stage splits into work items, the second runs as one.
// GRID-DAG: "grid": {{[1-9][0-9]+}},
// GRID-DAG: "grid": 1,

// CHECK: result[0]: tensor<64xf32>=[508{{( 508){63}\]$}}

func.func @main() -> tensor<64xf32> {
  %parity = omni.iota dim = 1 : tensor<8x2x128x64xf32>
  %row = omni.iota dim = 2 : tensor<8x2x128x64xf32>
  %one = omni.constant dense<1.0> : tensor<8x2x128x64xf32>
  %two = omni.constant dense<2.0> : tensor<8x2x128x64xf32>
  %big = omni.constant dense<16777216.0> : tensor<8x2x128x64xf32>
  %quarter = omni.constant dense<0.25> : tensor<8x2x128x64xf32>
  %zero = omni.constant dense<0.0> : tensor<8x2x128x64xf32>
  %twice = omni.mul %parity, %two : tensor<8x2x128x64xf32>
  %sign = omni.sub %one, %twice : tensor<8x2x128x64xf32>
  %lead = omni.mul %sign, %big : tensor<8x2x128x64xf32>
  %first = omni.compare eq, %row, %zero : tensor<8x2x128x64xf32>
  %v = omni.select %first, %lead, %quarter : tensor<8x2x128x64xi1>, tensor<8x2x128x64xf32>
  %x = omni.reshape %v : tensor<8x2x128x64xf32> -> tensor<2048x64xf32>
  %s = omni.reduce sum %x dims = [0] : tensor<2048x64xf32> -> tensor<64xf32>
  return %s : tensor<64xf32>
}
