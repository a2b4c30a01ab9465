#!/usr/bin/env bash
# The server's tests: ./server on three free loopback ports (the embedded model, CPU backend), the openai client
# against them (tests/server/test_server.py), then SIGTERM: each server must exit 0. Skips (exit 0, with a
# message) where python3 or its openai package is missing. Bounded: the tests 60 s, each server 10 s to start and to stop.
set -u
cd "$(dirname "$0")/../.."
if ! command -v python3 >/dev/null || ! python3 -c "import openai" 2>/dev/null; then
  echo "server tests skipped: python3 with the openai package is not installed (pip install openai)"
  exit 0
fi
[ -x ./server ] && [ -x ./demo ] || { echo "server tests: ./server and ./demo must be built first"; exit 1; }
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# a step budget out of range is refused at start, naming it (0 and below by the server, above 262144 by gpt2_load)
for bad in 0 262145; do
  out=$(./server --backend cpu --step-tokens $bad 2>&1) && { echo "FAIL ./server --step-tokens $bad started"; exit 1; }
  echo "$out" | grep -q "step.tokens" || { echo "FAIL ./server --step-tokens $bad: $out"; exit 1; }
done
KEY=test-key-$$
P1=$(port); P2=$(port); P3=$(port)
LOG=$(mktemp -d)
./server --backend cpu --host 127.0.0.1 --port "$P1" --api-key "$KEY" --max-batch 64 > "$LOG/main.log" 2>&1 &
S1=$!
./server --backend cpu --host 127.0.0.1 --port "$P2" --api-key "$KEY" --max-batch 1 --max-queue 0 --max-body 4096 \
  > "$LOG/small.log" 2>&1 &
S2=$!
./server --backend cpu --host 127.0.0.1 --port "$P3" --api-key "$KEY" --max-batch 2 --score-slots 2 \
  --step-tokens 16384 > "$LOG/scorer.log" 2>&1 &
S3=$!
up() { python3 -c "import sys, urllib.request; urllib.request.urlopen('http://127.0.0.1:$1/health', timeout=1)" 2>/dev/null; }
for _ in $(seq 100); do up "$P1" && up "$P2" && up "$P3" && break; sleep 0.1; done
rc=0
SERVER_URL=http://127.0.0.1:$P1 SMALL_URL=http://127.0.0.1:$P2 SCORER_URL=http://127.0.0.1:$P3 SERVER_KEY=$KEY ROOT=. \
  timeout 60 python3 tests/server/test_server.py || rc=1
for s in $S1 $S2 $S3; do
  kill -TERM "$s" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$s" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$s" 2>/dev/null; then echo "FAIL a server did not exit within 10 s of SIGTERM"; kill -KILL "$s"; rc=1
  else wait "$s" || { echo "FAIL a server exited $? after SIGTERM"; rc=1; }; fi
done
[ $rc = 0 ] || { echo "== server logs"; cat "$LOG"/*.log; }
rm -rf "$LOG"
exit $rc
