"""Writes a deeply nested omni program for test/omnic/deep-nesting.test.

  nest.py loops N   N nested scf.for in a public function
  nest.py modules N N nested builtin.module around a public function
  nest.py parens N  a type with N nested parentheses
"""
import sys

kind, n = sys.argv[1], int(sys.argv[2])
out = []
if kind == "loops":
    out.append("func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {")
    out.append("  %c0 = arith.constant 0 : index")
    out.append("  %c1 = arith.constant 1 : index")
    out.append("  %c2 = arith.constant 2 : index")
    for i in range(n):
        out.append("  scf.for %%i%d = %%c0 to %%c2 step %%c1 {" % i)
    out.extend(["  }"] * n)
    out.append("  return %x : tensor<4xf32>")
    out.append("}")
elif kind == "modules":
    out.extend(["module {"] * n)
    out.append("func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {")
    out.append("  return %x : tensor<4xf32>")
    out.append("}")
    out.extend(["}"] * n)
elif kind == "parens":
    out.append("func.func private @g() -> " + "(" * n + "f32" + ")" * n)
else:
    sys.exit("nest.py: kind must be loops, modules or parens, found " + kind)
print("\n".join(out))
