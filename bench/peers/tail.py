#!/usr/bin/env python3
"""Where an invoke's tail at concurrency 1 goes: the peers harness's invokeload (c=1, the direct call, the gateway's gRPC
InvokeJson and REST invoke-json and grpc-gateway interleaved in blocks) against one gateway build, with what the gateway
itself saw during the same run:

  - client-observed p50/p99 per path and the added p99 over the direct call (grpc-gateway's beside it);
  - the gateway's own invoke latency histogram (platform_gateway_invoke_duration_seconds, from the call's arrival in
    the operation to its reply, conversions and backend call included): the share of calls over 1 ms and 2.5 ms
    inside the gateway, against the client's p99 (a tail the histogram does not have happened outside the
    operation: sockets, wakeups, scheduling);
  - garbage collection during the run (nodejs_gc_duration_seconds, by kind): count, total pause, its share of the
    run's wall time (roughly the share of calls that met a pause);
  - the main thread's event-loop delay p99 over the run (nodejs_eventloop_lag_p99_seconds, reset by each scrape;
    prom-client samples it with a 10 ms timer whose own period is in the figure, so 10 ms are taken off);
  - context switches per call of every gateway thread (/proc/<pid>/task/*/status), voluntary and involuntary;
  - with strace installed: system calls per call by name, from a separate short traced run (strace slows the process,
    so those calls' latencies are not used).

  python3 bench/peers/tail.py --main /tmp/perf/new [--reps 3] [--calls 500] [--rounds 4] [--out /tmp/perf/tail] [--tag T]

Needs the harness's Go binaries ($PERF_BUILD/bin/invokeload, grpcgwproxy) and backend ($BACKEND_BIN), as compare.py."""
import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request

sys.dont_write_bytecode = True
from peerslib import BUILD, log, run_json, start_backend, start_gateway, start_grpcgw, wait_quiet  # noqa: E402

PATHS = ("direct", "gwgrpc", "gwrest", "grpcgw")


def scrape(http_port):
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=10) as r:
        return r.read().decode()


def samples(text, name):
    """{labels-string: value} of one metric family's samples."""
    out = {}
    for line in text.splitlines():
        if line.startswith(name):
            m = re.match(r'^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)', line)
            if m and m.group(1) == name:
                out[m.group(2) or ""] = float(m.group(3))
    return out


def invoke_buckets(text):
    """Cumulative count per upper bound of the invoke histogram, summed over services and codes."""
    by = {}
    for labels, v in samples(text, "platform_gateway_invoke_duration_seconds_bucket").items():
        le = re.search(r'le="([^"]+)"', labels).group(1)
        by[le] = by.get(le, 0) + v
    return by


def gc_totals(text):
    counts = {re.search(r'kind="(\w+)"', k).group(1): v for k, v in samples(text, "nodejs_gc_duration_seconds_count").items()}
    sums = {re.search(r'kind="(\w+)"', k).group(1): v for k, v in samples(text, "nodejs_gc_duration_seconds_sum").items()}
    return counts, sums


def switches(pid):
    vol = invol = 0
    for t in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            st = open(t).read()
        except OSError:
            continue
        vol += int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", st, re.M).group(1))
        invol += int(re.search(r"^nonvoluntary_ctxt_switches:\s+(\d+)", st, re.M).group(1))
    return vol, invol


def over(buckets_after, buckets_before, bound):
    """Share of the calls in the run whose in-gateway latency exceeded `bound` seconds."""
    total = buckets_after.get("+Inf", 0) - buckets_before.get("+Inf", 0)
    upto = buckets_after.get(bound, 0) - buckets_before.get(bound, 0)
    return (total - upto) / total if total else float("nan"), total


def one_rep(a, rep, outdir):
    procs = []
    try:
        backend = start_backend()
        bport = backend.port
        procs.append(backend)
        gw = start_gateway(a.main, bport)
        procs.append(gw)
        grpcgw = start_grpcgw(bport)
        procs.append(grpcgw)
        load = [os.path.join(BUILD, "bin/invokeload"), "-conc", "1", "-pid-backend", str(backend.pid), "-pid-gw", str(gw.pid), "-pid-grpcgw", str(grpcgw.pid),
                "-direct", f"127.0.0.1:{bport}", "-gwgrpc", f"127.0.0.1:{gw.port}", "-gwrest", f"127.0.0.1:{gw.http_port}", "-grpcgw", f"127.0.0.1:{grpcgw.port}"]
        run_json(load + ["-calls", "200", "-rounds", "1", "-warm", "300"], 600)  # warm-up, not recorded
        before = scrape(gw.http_port)
        sw0 = switches(gw.pid)
        t0 = time.time()
        r = run_json(load + ["-calls", str(a.calls), "-rounds", str(a.rounds), "-warm", "0"], 900)
        wall = time.time() - t0
        sw1 = switches(gw.pid)
        after = scrape(gw.http_port)
        p = r["paths"]
        gw_calls = p["gwgrpc"]["calls"] + p["gwrest"]["calls"]
        b0, b1 = invoke_buckets(before), invoke_buckets(after)
        c0, s0 = gc_totals(before)
        c1, s1 = gc_totals(after)
        gc = {k: {"count": c1.get(k, 0) - c0.get(k, 0), "pause_ms": 1000 * (s1.get(k, 0) - s0.get(k, 0))} for k in c1}
        over1, counted = over(b1, b0, "0.001")
        over25, _ = over(b1, b0, "0.0025")
        lag = samples(after, "nodejs_eventloop_lag_p99_seconds").get("", float("nan"))
        rec = {
            "tag": a.tag, "rep": rep, "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "main": a.main, "calls_per_block": a.calls, "rounds": a.rounds,
            "paths": {k: {f: p[k][f] for f in ("p50_us", "p99_us", "rps", "proxy_cpu_us_per_call", "errors")} for k in PATHS},
            "added_p99_us": {k: p[k]["p99_us"] - p["direct"]["p99_us"] for k in PATHS if k != "direct"},
            "added_p50_us": {k: p[k]["p50_us"] - p["direct"]["p50_us"] for k in PATHS if k != "direct"},
            "in_gateway": {"calls": counted, "over_1ms": over1, "over_2_5ms": over25},
            "gc": gc, "gc_pause_share": sum(g["pause_ms"] for g in gc.values()) / 1000 / wall,
            "eventloop_lag_p99_ms": 1000 * lag - 10,
            "switches_per_call": {"voluntary": (sw1[0] - sw0[0]) / gw_calls, "involuntary": (sw1[1] - sw0[1]) / gw_calls},
            "loadavg": open("/proc/loadavg").read().strip(),
        }
        if a.strace and shutil.which("strace"):
            rec["syscalls_per_call"] = syscalls(gw)
        with open(os.path.join(outdir, "tail.jsonl"), "a") as f:
            f.write(json.dumps(rec) + "\n")
        return rec
    finally:
        for pr in reversed(procs):
            pr.stop()


def syscalls(gw):
    """System calls per call of the gateway over a short run of each gateway path alone (strace -c -f)."""
    out = {}
    for path, port in (("gwgrpc", gw.port), ("gwrest", gw.http_port)):
        argv = [os.path.join(BUILD, "bin/invokeload"), "-conc", "1", "-pid-gw", str(gw.pid), f"-{path}", f"127.0.0.1:{port}", "-calls", "1000", "-rounds", "1", "-warm", "0"]
        summary = f"/tmp/tail-strace-{os.getpid()}-{path}.txt"
        st = subprocess.Popen(["strace", "-c", "-f", "-p", str(gw.pid), "-o", summary], stderr=subprocess.DEVNULL)
        time.sleep(1)
        try:
            run_json(argv, 600)
        finally:
            st.terminate()
            st.wait(timeout=30)
        counts = {}
        for line in open(summary):
            m = re.match(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$", line)
            if m and m.group(2) != "total":
                counts[m.group(2)] = int(m.group(1)) / 1000
        os.unlink(summary)
        out[path] = {k: round(v, 2) for k, v in sorted(counts.items(), key=lambda kv: -kv[1]) if v >= 0.05}
    return out


def fmt(xs, nd=0):
    xs = [x for x in xs if x == x]
    return f"{statistics.median(xs):,.{nd}f} [{min(xs):,.{nd}f}-{max(xs):,.{nd}f}]" if xs else "n/a"


def summarize(recs):
    lines = ["| figure | gRPC InvokeJson | REST invoke-json | grpc-gateway |", "|---|---:|---:|---:|"]
    for label, key in (("added p50 us", "added_p50_us"), ("added p99 us", "added_p99_us")):
        lines.append(f"| {label} | " + " | ".join(fmt([r[key][p] for r in recs]) for p in ("gwgrpc", "gwrest", "grpcgw")) + " |")
    lines.append("| added p99 / grpc-gateway's, per rep | " + " | ".join(
        ", ".join(f"{r['added_p99_us'][p] / r['added_p99_us']['grpcgw']:.2f}" for r in recs) for p in ("gwgrpc", "gwrest")) + " | - |")
    lines += ["", "| inside the gateway (both fronts) | median [min-max] |", "|---|---:|",
              f"| calls over 1 ms in the operation | {fmt([100 * r['in_gateway']['over_1ms'] for r in recs], 2)} % |",
              f"| calls over 2.5 ms in the operation | {fmt([100 * r['in_gateway']['over_2_5ms'] for r in recs], 2)} % |",
              f"| GC pauses (count: minor / major / incremental) | {fmt([r['gc'].get('minor', {}).get('count', 0) for r in recs])} / {fmt([r['gc'].get('major', {}).get('count', 0) for r in recs])} / {fmt([r['gc'].get('incremental', {}).get('count', 0) for r in recs])} |",
              f"| GC pause share of the run's wall time | {fmt([100 * r['gc_pause_share'] for r in recs], 2)} % |",
              f"| main thread event-loop delay p99 | {fmt([r['eventloop_lag_p99_ms'] for r in recs], 2)} ms |",
              f"| context switches per call, voluntary / involuntary | {fmt([r['switches_per_call']['voluntary'] for r in recs], 2)} / {fmt([r['switches_per_call']['involuntary'] for r in recs], 2)} |"]
    sc = [r["syscalls_per_call"] for r in recs if "syscalls_per_call" in r]
    if sc:
        lines += ["", "System calls per call (strace -c -f, separate 1,000-call run per front): "
                  + "; ".join(f"{p}: " + ", ".join(f"{k} {v}" for k, v in sc[-1][p].items()) for p in ("gwgrpc", "gwrest"))]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--main", default="/tmp/perf/new", help="a built checkout (bench/peers/prepare.sh REF DIR)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--calls", type=int, default=500, help="calls per block")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--no-strace", dest="strace", action="store_false")
    ap.add_argument("--no-gate", action="store_true")
    ap.add_argument("--out", default="/tmp/perf/tail")
    ap.add_argument("--tag", default=time.strftime("tail-%Y%m%dT%H%M%S"))
    ap.add_argument("--summarize", metavar="FILE", help="only print the summary of recorded lines (with --tag)")
    a = ap.parse_args()
    if a.summarize:
        recs = [json.loads(l) for l in open(a.summarize) if l.strip()]
        print(summarize([r for r in recs if r["tag"] == a.tag]))
        return
    outdir = os.path.join(a.out, a.tag)
    os.makedirs(outdir, exist_ok=True)
    recs = []
    for rep in range(a.reps):
        if not a.no_gate:
            busy, load, waited = wait_quiet()
            log(f"rep {rep}: busy {busy:.2f}, load {load:.2f} after waiting {waited:.0f} s")
        recs.append(one_rep(a, rep, outdir))
        log(f"rep {rep}: added p99 gRPC {recs[-1]['added_p99_us']['gwgrpc']} us, REST {recs[-1]['added_p99_us']['gwrest']} us, grpc-gateway {recs[-1]['added_p99_us']['grpcgw']} us")
    text = summarize(recs)
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
