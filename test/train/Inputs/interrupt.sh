#!/usr/bin/env bash
# usage: interrupt.sh SIGNAL RUN_DIR COMMAND...
# Starts COMMAND (a long omnirun training run writing RUN_DIR/metrics.jsonl)
# in the background, waits until RUN_DIR/metrics.jsonl holds a whole line
# (so training is under way; no sleeps that guess how long start-up
# takes), sends SIGNAL once and prints "exit <code>" when the run ends.
# The run's stdout and stderr go to RUN_DIR.out and RUN_DIR.err.
set -u
signal=$1 run=$2
shift 2
"$@" > "$run.out" 2> "$run.err" &
pid=$!
for _ in $(seq 1 6000); do
  if grep -q '}$' "$run/metrics.jsonl" 2> /dev/null; then
    break
  fi
  if ! kill -0 "$pid" 2> /dev/null; then
    break
  fi
  sleep 0.01
done
kill -s "$signal" "$pid"
wait "$pid"
echo "exit $?"
