#!/usr/bin/env python3
"""Every call of an invoke run at concurrency 1, with its place: the peers harness's invokeload with one change
(bench/peers/invokedump/invokeload-dump.patch: `-dump FILE` writes `path,round,index,us,start_unix_us` per measured
call), run with the harness's c=1 counts (300 calls per block, 4 rounds, 200 warm-up calls per path) over the direct
call, the gateway's gRPC InvokeJson and REST invoke-json, and grpc-gateway. It shows where a path's slowest calls are:
which round (how long after the warm-up), and where in a block (after the path sat idle while the others ran).

  python3 bench/peers/c1_calls.py --main /tmp/perf/new [--reps 3] [--calls 300] [--out /tmp/perf/c1] [--env K=V,...]
      [--warm 200] [--warm-deadline] [--idle-s 0] [--paths direct,gwgrpc,gwrest,grpcgw]

The harness warms each path up with calls that carry no deadline, while every measured block runs under one deadline,
so each measured gRPC call carries a grpc-timeout that changes from call to call (a new HPACK literal each time).
`--warm-deadline` warms up the same way the blocks measure; `--warm` and `--paths` change the counts and the paths.
`--idle-s` waits that long between the servers listening and the first call: whether the first rounds' slow calls
follow the calls made (the JIT) or the time since start (the collector, the compiler's background work).

The summary per path: added p50 and p99 over the direct call per repetition, the calls over 2 ms by round and in the
first three calls of a block, and the median of a block's first call against the others'. With NODE set to a wrapper
the gateway's log is kept as OUT/gwN.log to line slow calls up with V8's compilations and collections: with
NODE=bench/peers/node-v8-trace.sh (V8's traces, each line stamped with the wall clock), bench/peers/c1_explain.py
--out OUT says which slow calls overlapped a compilation, a collection or a deoptimization. The wrapper must
`exec node` (or pass SIGTERM on): stopping a wrapper such as `strace -f node ...` detaches strace and leaves the gateway
running, idle but waking every 10 ms, through every later run on the box.
Needs the harness's Go build (its build.sh: PERF_BUILD) and backend ($BACKEND_BIN), as compare.py."""
import argparse
import collections
import csv
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True
from peerslib import BUILD, PEERS, start_backend, start_gateway, start_grpcgw  # noqa: E402

ALL_PATHS = ("direct", "gwgrpc", "gwrest", "grpcgw")


def build_dump():
    """invokeload with the dump patch, built as the harness's build.sh builds invokeload (its GOPATH, Debian's Go)."""
    gp = os.path.join(BUILD, "gopath")
    src = os.path.join(gp, "src/perf/invokedump")
    out = os.path.join(BUILD, "bin/invokedump")
    os.makedirs(src, exist_ok=True)
    shutil.copy(os.path.join(PEERS, "go/invokeload/main.go"), os.path.join(src, "main.go"))
    subprocess.run(["patch", "-s", "-p1", "-d", src, "-i", os.path.join(os.path.dirname(os.path.abspath(__file__)), "invokedump/invokeload-dump.patch")], check=True)
    deb = os.path.join(BUILD, "debroot")
    env = {**os.environ, "GOPATH": f"{gp}:{deb}/usr/share/gocode:/usr/share/gocode", "GO111MODULE": "off", "GOFLAGS": "",
           "GOCACHE": os.environ.get("GOCACHE", os.path.join(BUILD, "gocache"))}
    subprocess.run(["go", "build", "-o", out, "."], cwd=src, env=env, check=True)
    return out


def summarize(out, reps, paths=ALL_PATHS):
    res = collections.defaultdict(list)
    slow = collections.Counter()
    first = collections.Counter()
    # Each block's first call (after the path sat idle while the others ran), and the rest.
    opening = collections.defaultdict(list)
    others = collections.defaultdict(list)
    for rep in range(reps):
        by = collections.defaultdict(list)
        for p, rnd, i, us, _ in (r for r in csv.reader(open(os.path.join(out, f"rep{rep}.csv"))) if len(r) == 5):
            by[p].append(int(us))
            (opening if i == "0" else others)[p].append(int(us))
            if int(us) > 2000:
                slow[(p, int(rnd))] += 1
                if int(i) < 3:
                    first[p] += 1
        q = {p: sorted(v) for p, v in by.items()}
        for p in paths[1:]:
            res[p].append((q[p][len(q[p]) // 2] - q["direct"][len(q["direct"]) // 2], q[p][int(len(q[p]) * 0.99)] - q["direct"][int(len(q["direct"]) * 0.99)]))
    for p in paths:
        added = f"added p50 {[a for a, _ in res[p]]} us, p99 {[b for _, b in res[p]]} us; " if p in res else ""
        print(f"{p}: {added}calls over 2 ms by round {[slow[(p, r)] for r in range(4)]}, in a block's first 3 calls {first[p]}; "
              f"median of a block's first call {statistics.median(opening[p]):.0f} us, of the others {statistics.median(others[p]):.0f} us")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--main", default="/tmp/perf/new")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--out", default="/tmp/perf/c1")
    ap.add_argument("--env", default="", help="K=V,... for the gateway (e.g. GATEWAY_THREADS=1); {BACKEND_PORT} in a value is the backend's port")
    ap.add_argument("--warm", type=int, default=200, help="warm-up calls per path (the harness: 200)")
    ap.add_argument("--idle-s", type=float, default=0, help="seconds between the servers listening and the first call")
    ap.add_argument("--warm-deadline", action="store_true", help="warm up under one deadline per path, as the blocks measure")
    ap.add_argument("--paths", default=",".join(ALL_PATHS), help="the paths to run; direct first (the added figures are over it)")
    a = ap.parse_args()
    paths = tuple(a.paths.split(","))
    if paths[0] != "direct" or set(paths) - set(ALL_PATHS):
        raise SystemExit(f"--paths: direct first, then any of {ALL_PATHS[1:]}")
    os.makedirs(a.out, exist_ok=True)
    dump = build_dump()
    for rep in range(a.reps):
        procs = [start_backend()]
        bport = procs[0].port
        try:
            gw = start_gateway(a.main, bport, env={k: v.replace("{BACKEND_PORT}", str(bport)) for k, v in (kv.split("=", 1) for kv in a.env.split(",") if kv)})
            procs.append(gw)
            grpcgw = start_grpcgw(bport)
            procs.append(grpcgw)
            time.sleep(a.idle_s)
            addr = {"direct": f"127.0.0.1:{bport}", "gwgrpc": f"127.0.0.1:{gw.port}", "gwrest": f"127.0.0.1:{gw.http_port}", "grpcgw": f"127.0.0.1:{grpcgw.port}"}
            subprocess.run([dump, "-conc", "1", "-calls", str(a.calls), "-rounds", "4", "-warm", str(a.warm), "-dump", os.path.join(a.out, f"rep{rep}.csv"),
                            *(["-warm-deadline"] if a.warm_deadline else []),
                            "-pid-backend", str(procs[0].pid), "-pid-gw", str(gw.pid), "-pid-grpcgw", str(grpcgw.pid),
                            *[x for p in paths for x in (f"-{p}", addr[p])]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600, check=True)
            with open(os.path.join(a.out, f"gw{rep}.log"), "w") as f:
                f.write(gw.text())
        finally:
            for p in reversed(procs):
                p.stop()
    summarize(a.out, a.reps, paths)


if __name__ == "__main__":
    main()
