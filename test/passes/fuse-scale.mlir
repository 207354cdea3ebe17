// The merge legality check of omni-fuse costs what depends on the first
// group, not the distance between the two groups (docs/fusion.md, "How a
// merge is checked"). Inputs/fuse_far_chain.py writes N groups that each
// merge with a consumer about 2N ops below, past one op that reads the
// group (it moves below the merged group) and ops that do not. The check
// walks the users of 2 ops per merge: 2N visits in all, at N = 300 and at
// N = 600. Walking the ops between the groups, as the check did before,
// visits about 3N^2/2 (135,000 and 540,000).
// RUN: python3 %S/Inputs/fuse_far_chain.py 300 > %t.300.mlir
// RUN: omni-opt %t.300.mlir -omni-fuse -omni-fuse-stats 2>&1 >/dev/null | FileCheck %s --check-prefix=N300
// N300: omni-fuse: 600 ops visited, {{[0-9]+}} keys renumbered, 0 landmark rejections (@far_chain)
// RUN: python3 %S/Inputs/fuse_far_chain.py 600 > %t.600.mlir
// RUN: omni-opt %t.600.mlir -omni-fuse -omni-fuse-stats 2>&1 >/dev/null | FileCheck %s --check-prefix=N600
// N600: omni-fuse: 1200 ops visited, {{[0-9]+}} keys renumbered, 0 landmark rejections (@far_chain)

// The merges happened: each %p_i (exp) and %q_i (add) are one region,
// after the matmul %c_i, and the matmul %t_i reading %p_i follows it.
// RUN: python3 %S/Inputs/fuse_far_chain.py 3 | omni-opt -omni-fuse | FileCheck %s
// CHECK-LABEL: func.func @far_chain
// CHECK-COUNT-3: omni.matmul %arg0, %arg0
// CHECK-NEXT: %[[C1:[0-9]+]] = omni.matmul %arg0, %arg0
// CHECK-NEXT: %[[F1:[0-9]+]] = omni.fusion(%{{[0-9]+}}, %[[C1]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: omni.exp
// CHECK-NEXT: omni.add
// CHECK-NEXT: omni.yield
// CHECK-NEXT: }
// CHECK-NEXT: omni.matmul %[[F1]], %{{.*}}
// CHECK-COUNT-2: omni.exp
// CHECK-NOT: omni.exp
