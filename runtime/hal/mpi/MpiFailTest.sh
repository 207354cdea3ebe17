#!/usr/bin/env bash
# MpiFailTest.sh MODE MPIEXEC "FLAGS" BINARY - runs OmniHalMpiFailTest MODE
# under mpirun -np 2 and asserts that the job ends within 60 s, non-zero,
# with the message that names what happened (MpiFailTest.cpp).
set -u
mode=$1 mpiexec=$2 flags=$3 binary=$4
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# shellcheck disable=SC2086 # flags are words
timeout 60 "$mpiexec" $flags -np 2 "$binary" "$mode" >"$log" 2>&1
rc=$?
cat "$log"
fail() { echo "FAIL ($mode): $*"; exit 1; }
[ "$rc" -ne 124 ] || fail "the job was still running after 60 s"
[ "$rc" -ne 0 ] || fail "the job exited 0"
grep -q "rank 1: the first all_reduce passed" "$log" ||
  fail "the ranks did not get as far as the failure"
grep -q "finished" "$log" && fail "a rank finished its second all_reduce"
case $mode in
kill)
  grep -Eq "process rank 1 .*exited on signal 9" "$log" ||
    fail "mpirun did not say that rank 1 was killed" ;;
timeout)
  grep -q "rank 0: all_reduce waited longer than 2 s for the other ranks of its group of 2; aborting the MPI job" "$log" ||
    fail "rank 0 did not say that it timed out" ;;
abort)
  grep -q "rank 1: the reward server is down; aborting the MPI job" "$log" ||
    fail "rank 1 did not say why it aborted" ;;
esac
echo "PASS ($mode): exit $rc"
