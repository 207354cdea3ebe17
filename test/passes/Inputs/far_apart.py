"""Writes a function whose exp of %x is read N ops later (fuse-far-apart.test)."""
import sys

n = int(sys.argv[1])
print("func.func @far(%x: tensor<64xf32>, %y: tensor<64xf32>) -> tensor<64xf32> {")
print("  %e = omni.exp %x : tensor<64xf32>")
prev = "%y"
for i in range(n):
    print(f"  %c{i} = omni.neg {prev} : tensor<64xf32>")
    prev = f"%c{i}"
print(f"  %r = omni.add %e, {prev} : tensor<64xf32>")
print("  return %r : tensor<64xf32>")
print("}")
