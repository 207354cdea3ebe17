#!/usr/bin/env bash
# The main job. Until the reference evaluator, compiler and runtime exist,
# it runs what exists on a small FlowGRPO program and says what is coming.
set -euo pipefail
BUILD_DIR=${1:-build}
cd "$(dirname "$0")/.."
OPT="$BUILD_DIR/bin/omni-opt"

echo "== omni demo =="
echo "-- the FlowGRPO ops of examples/flowgrpo-step.mlir, verified and folded by omni-opt:"
"$OPT" examples/flowgrpo-step.mlir --omni-pipeline
echo
echo "-- coming next: the reference evaluator (issue 3), autodiff (4), CPU code"
echo "   generation and omnirun (5), model frontends and CPU training (6)."
