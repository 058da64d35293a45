#!/bin/bash
# Like peers-ab.sh, for more than two sides: alternately runs ../shared/peers/run_invoke.py (c=64 and c=1, paths
# direct, gwgrpc, gwrest, grpcgw; PATHS=... to change, e.g. adding passthru, the bare grpc-js
# pass-through proxy) on each ARM, N times each, then prints bench/invoke/peers-summary.py. An arm is
# NAME=DIR or NAME=DIR,VAR=VALUE,... (environment for the gateway, e.g. GATEWAY_THREADS=1): each DIR a checkout with
# `npm run build` done and node_modules present.
#
#   bench/invoke/peers-arms.sh TAG N ARM... [--quick]
#   bench/invoke/peers-arms.sh i16 3 base=/tmp/base new=. offload=.,GATEWAY_GRPC_INVOKE_OFFLOAD=1 t1=.,GATEWAY_THREADS=1
set -euo pipefail
TAG=$1 N=$2
shift 2
QUICK=
ARMS=()
for a in "$@"; do if [ "$a" = --quick ]; then QUICK=--quick; else ARMS+=("$a"); fi; done
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS=${PEERS:-$HERE/../../../shared/peers}
export PERF_OUT=${PERF_OUT:-/tmp/invoke-ab}
for i in $(seq 1 "$N"); do
  for arm in "${ARMS[@]}"; do
    name=${arm%%=*}
    IFS=, read -r -a parts <<< "${arm#*=}"
    dir=$(cd "${parts[0]}" && pwd)
    (cd "$PEERS" && env "${parts[@]:1}" PERF_MAIN="$dir" python3 run_invoke.py --reps 1 --rep-base "$i" --conc 64,1 $QUICK --no-wait \
      --paths "${PATHS:-direct,gwgrpc,gwrest,grpcgw}" --tag "$TAG-$name" --out "$TAG.jsonl")
  done
  uptime
done
python3 "$HERE/peers-summary.py" "$PERF_OUT/$TAG.jsonl"
