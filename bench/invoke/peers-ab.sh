#!/bin/bash
# A/B of the invoke path against grpc-gateway with the shared peers harness: alternately runs
# ../shared/peers/run_invoke.py (Go load client, Go inventory backend, grpc-gateway's REST proxy, interleaved paths)
# on a BASE build and on a NEW build (each a checkout with `npm run build` done and node_modules present), N times
# each, c=64 and c=1, then prints the medians [min-max] of bench/invoke/peers-summary.py.
#
#   bench/invoke/peers-ab.sh TAG N BASE_DIR NEW_DIR [--quick]
#
# Settings of the harness (PERF_BUILD, BACKEND_BIN, ...) come from its env.sh; results go to $PERF_OUT/TAG.jsonl
# (default /tmp/invoke-ab). The quiet-machine gate is skipped (--no-wait): the alternation is what makes the sides
# comparable on a shared machine.
set -euo pipefail
TAG=$1 N=$2 BASE=$3 NEW=$4 QUICK=${5:-}
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS=${PEERS:-$HERE/../../../shared/peers}
export PERF_OUT=${PERF_OUT:-/tmp/invoke-ab}
cd "$PEERS"
for i in $(seq 1 "$N"); do
  for side in new base; do
    if [ "$side" = new ]; then M=$NEW; else M=$BASE; fi
    PERF_MAIN=$M python3 run_invoke.py --reps 1 --rep-base "$i" --conc 64,1 $QUICK --no-wait \
      --paths direct,gwgrpc,gwrest,grpcgw --tag "$TAG-$side" --out "$TAG.jsonl"
  done
done
python3 "$HERE/peers-summary.py" "$PERF_OUT/$TAG.jsonl"
