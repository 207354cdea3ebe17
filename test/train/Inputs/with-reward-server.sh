#!/usr/bin/env bash
# usage: with-reward-server.sh NAME [SERVER_OPTION...] -- COMMAND...
# Starts examples/reward-server/server.py on a free port of 127.0.0.1
# (--port 0; it writes the port to NAME.port once it listens), runs
# COMMAND with every @PORT@ in its arguments replaced by the port (the
# socket's path when SERVER_OPTIONs has --unix), stops
# the server and prints "exit <code>" (COMMAND's exit code). The server's
# output goes to NAME.server.log. Nothing here can hang: the wait for the
# port and the command are bounded.
set -u
name=$1
shift
server_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  server_args+=("$1")
  shift
done
shift
here=$(cd "$(dirname "$0")" && pwd)
# Debian's python3 has python3-pil (tools/setup/install-deps.sh); a python3
# earlier on PATH (pyenv, a venv) may not.
python=/usr/bin/python3
[ -x "$python" ] || python=python3
server=$here/../../../examples/reward-server/server.py
rm -f "$name.port"
"$python" "$server" --port 0 --port-file "$name.port" "${server_args[@]}" \
  > "$name.server.log" 2>&1 &
pid=$!
for _ in $(seq 1 3000); do
  [ -s "$name.port" ] && break
  kill -0 "$pid" 2> /dev/null || break
  sleep 0.01
done
if ! [ -s "$name.port" ]; then
  echo "with-reward-server: the server did not start:" >&2
  cat "$name.server.log" >&2
  kill "$pid" 2> /dev/null
  exit 1
fi
port=$(cat "$name.port")
command=()
for a in "$@"; do
  command+=("${a//@PORT@/$port}")
done
timeout 600 "${command[@]}"
code=$?
kill "$pid" 2> /dev/null
wait "$pid" 2> /dev/null
echo "exit $code"
