#!/bin/bash
# A NODE wrapper for bench/peers/c1_calls.py (which keeps the gateway's output as OUT/gwN.log): runs node with V8's
# compilation, deoptimization and collection traces, each line of its output prefixed with the wall-clock time in
# seconds ($EPOCHREALTIME), so bench/peers/c1_explain.py can line slow calls up with what V8 did meanwhile. It passes SIGTERM
# and SIGINT on to node and exits with node's status, as the harness expects of the server it stops.
node --trace-opt --trace-deopt --trace-gc "$@" > >(while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done) 2>&1 &
pid=$!
trap 'kill -TERM $pid' TERM INT
wait $pid
rc=$?
# A trapped signal ends the first wait early: wait for node itself.
if kill -0 $pid 2>/dev/null; then wait $pid; rc=$?; fi
exit $rc
