#!/bin/bash
# The gateway's CPU per REST invoke-json call and its context switches per call at 64 in flight, for one --threads
# value: the Go inventory backend and the Go load client of the peers harness (../shared/peers, built), the gateway
# from DIR's dist/, 500 warm-up calls, then 20,000 measured calls; user and sys CPU from /proc/<pid>/stat, voluntary
# and involuntary context switches summed over the gateway's threads. Run it alternately for 1 and 2 threads:
#
#   for t in 1 2 1 2; do bench/invoke/threads-cpu.sh . $t; done
#
# PERF_BUILD (default /tmp/perf/build) and BACKEND_BIN (default /tmp/peers-backend/server) as in the peers harness.
set -euo pipefail
DIR=$(cd "$1" && pwd); T=$2
BIN=${PERF_BUILD:-/tmp/perf/build}/bin/invokeload
BACKEND=${BACKEND_BIN:-/tmp/peers-backend/server}
TMP=$(mktemp -d)
BP=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BACKEND" -port "$BP" >/dev/null 2>&1 & BPID=$!
printf "services:\n  - name: inventory\n    grpc: {host: 127.0.0.1, port: %s}\n" "$BP" > "$TMP/cfg.yaml"
(cd "$DIR" && GATEWAY_THREADS=$T exec node dist/src/main/cli.js --grpc-port 0 --http-port 0 --config "$TMP/cfg.yaml" --log-level info > "$TMP/gw.log" 2>&1) & GPID=$!
trap 'kill $GPID $BPID 2>/dev/null; rm -rf "$TMP"' EXIT
HP=
for _ in $(seq 1 100); do HP=$(grep -o '"httpPort":[0-9]*' "$TMP/gw.log" | head -1 | cut -d: -f2 || true); [ -n "$HP" ] && break; sleep 0.2; done
[ -n "$HP" ] || { echo "the gateway did not start: $(tail -3 "$TMP/gw.log")" >&2; exit 1; }
counters() {
  local v=0 n=0 t
  for t in /proc/$GPID/task/*; do
    v=$((v + $(awk '/^voluntary_ctxt_switches/{print $2}' "$t/status"))); n=$((n + $(awk '/^nonvoluntary_ctxt_switches/{print $2}' "$t/status")))
  done
  echo "$v $n $(awk '{print $14, $15}' /proc/$GPID/stat)"
}
"$BIN" -conc 64 -calls 500 -rounds 1 -warm 500 -gwrest "127.0.0.1:$HP" >/dev/null 2>&1
read -r v0 n0 u0 s0 < <(counters)
timeout 300 "$BIN" -conc 64 -calls 20000 -rounds 1 -warm 0 -gwrest "127.0.0.1:$HP" >/dev/null 2>&1
read -r v1 n1 u1 s1 < <(counters)
TICK=$(getconf CLK_TCK)
awk -v t="$T" -v v="$((v1 - v0))" -v n="$((n1 - n0))" -v u="$((u1 - u0))" -v s="$((s1 - s0))" -v hz="$TICK" 'BEGIN {
  c = 20000; printf "--threads %s: user %.0f us/call, sys %.0f us/call, voluntary %.2f and involuntary %.2f context switches/call\n", t, u * 1e6 / hz / c, s * 1e6 / hz / c, v / c, n / c }'
