#!/usr/bin/env python3
"""Which functions V8's TurboFan compiles inside a gRPC fan-out's measured window, and for how long: the harness's
fanoutload against one gateway build (100 subscriptions per connection by default, 20 warm-up events, 200 measured 5 ms
apart, as run_fanout.py), the gateway run with `--trace-opt --trace-opt-verbose` and its output line-buffered, its
log's growth sampled every 2 ms on the monotonic clock fanoutload reports its window on. Prints the run's CPU per
delivery, then the compilations whose lines fell in the window: count, compiler milliseconds, and the top functions.
`--trace-opt` itself costs some CPU: read the compile figures, not this run's CPU per delivery.

  python3 bench/peers/compile_window.py BUILD [--subs 1000] [--conns N] [--warm 20] [--events 200] [--whole] [--top 40] [--deopt] [--keep-log FILE]

--whole counts every compilation after start-up (the subscribers' setup and the warm-up too), not only the window's.
--deopt adds `--trace-deopt` and lists the counted deoptimizations: bailouts with their reason, and code marked for
deoptimization ("weak objects", "code dependencies"). NODE (a wrapper script) gives the gateway other V8 flags."""
import argparse
import bisect
import collections
import json
import os
import re
import sys
import threading
import time

sys.dont_write_bytecode = True
from peerslib import BUILD, PEERS, environment, run_json  # noqa: E402

STDBUF = "/usr/libexec/coreutils/libstdbuf.so"  # coreutils' stdbuf preload: V8 prints with stdio, fully buffered to a file
DEOPT = re.compile(r"bailout \(kind: [^,]*, reason: ([^)]*)\): begin.*?<JSFunction (\S*)")
# Code thrown away without a bailout of its own: "weak objects" (a map or object it was compiled against died in a
# full GC), "code dependencies" (a field or prototype it relied on changed).
MARKED = re.compile(r"marking dependent code .*?<SharedFunctionInfo ?([^>]*)>\).*?reason: ([^\]]*)\]")
COMPILED = re.compile(r"completed compiling .*?<JSFunction (\S*) .*?took ([\d.]+), ([\d.]+), ([\d.]+) ms")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--subs", type=int, default=1000)
    ap.add_argument("--conns", type=int, default=0, help="default: one per 100 subscribers")
    ap.add_argument("--events", type=int, default=200)
    ap.add_argument("--warm", type=int, default=20)
    ap.add_argument("--whole", action="store_true")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--deopt", action="store_true", help="also run with --trace-deopt and print the counted deoptimizations")
    ap.add_argument("--keep-log", help="write the gateway's whole trace output here, with a line marking the window's start and end")
    a = ap.parse_args()
    import perflib  # noqa: E402  (peerslib put the harness on the path)
    from run_fanout import GATEWAY_CONFIG  # noqa: E402

    perflib.MAIN = os.path.abspath(a.build)
    os.chdir(PEERS)
    if not os.path.exists(STDBUF):
        raise SystemExit(f"needs {STDBUF} (coreutils) to line-buffer the gateway's output")
    with environment({"LD_PRELOAD": STDBUF, "_STDBUF_O": "L"}):
        srv = perflib.start_gateway(GATEWAY_CONFIG, extra_node_args=["--trace-opt", "--trace-opt-verbose"] + (["--trace-deopt"] if a.deopt else []))
    marks, stop = [], threading.Event()

    def watch():
        while not stop.is_set():
            marks.append((time.monotonic() * 1e6, os.path.getsize(srv.logf.name)))
            time.sleep(0.002)

    threading.Thread(target=watch, daemon=True).start()
    try:
        time.sleep(3)  # start-up's own compilations are done
        after_start = os.path.getsize(srv.logf.name)
        r = run_json([os.path.join(BUILD, "bin/fanoutload"), "-system", "grpc", "-addr", f"127.0.0.1:{srv.port}", "-subs", str(a.subs),
                      "-conns", str(a.conns or max(1, a.subs // 100)), "-events", str(a.events), "-warm", str(a.warm), "-spacing-ms", "5",
                      "-server-pid", str(srv.pid), "-size", "256", "-label", "compile-window"], 600)
        stop.set()
        with open(srv.logf.name, "rb") as f:
            raw = f.read()
    finally:
        stop.set()
        srv.stop()
    times = [m[0] for m in marks]

    def offset(t):
        return marks[min(bisect.bisect_left(times, t), len(marks) - 1)][1]

    if a.keep_log:
        w0, w1 = offset(r["mono_start_us"]), offset(r["mono_end_us"])
        with open(a.keep_log, "wb") as f:
            f.write(raw[:after_start] + b"=== start-up done\n" + raw[after_start:w0] + b"=== window start\n" + raw[w0:w1] + b"=== window end\n" + raw[w1:])
    lo, hi = (after_start, len(raw)) if a.whole else (offset(r["mono_start_us"]), offset(r["mono_end_us"]))
    total, count, deopts = collections.Counter(), collections.Counter(), collections.Counter()
    for line in raw[lo:hi].decode(errors="replace").splitlines():
        d = DEOPT.search(line)
        if d:
            deopts[f"{d.group(2)} ({d.group(1)})"] += 1
        d = MARKED.search(line)
        if d:
            deopts[f"{d.group(1) or '(anonymous)'} (marked: {d.group(2)})"] += 1
        m = COMPILED.search(line)
        if m:
            total[m.group(1)] += sum(float(x) for x in m.groups()[1:])
            count[m.group(1)] += 1
    print(json.dumps({"subs": a.subs, "delivered": r["delivered"], "server_cpu_us_per_delivery": r["server_cpu_us_per_delivery"],
                      "server_cpu_ms": r["server_cpu_us"] / 1000, "window_ms": (r["mono_end_us"] - r["mono_start_us"]) / 1000,
                      "compilations": sum(count.values()), "compiler_ms": round(sum(total.values()), 1), "counted": "whole run" if a.whole else "window"}))
    for name, ms in total.most_common(a.top):
        print(f"{ms:8.1f} ms {count[name]:3d}x {name}")
    for what, n in deopts.most_common(a.top):
        print(f"deopt {n:3d}x {what}")


if __name__ == "__main__":
    main()
