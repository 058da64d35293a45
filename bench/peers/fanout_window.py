#!/usr/bin/env python3
"""Gateway gRPC fan-out (1,000 subscribers by default, 100 per connection; --per-conn 1: one connection each) with a chosen number of measured events, one build, in
variants: `off` (tracing off), `on` (tracing on at 100% sampling, exporting OTLP/HTTP to a sink in this process) and
`pad` (tracing off, 330-byte events: the same delivered bytes as a traced event, whose `traceparent` extension adds
74). run_fanout.py measures 200 events (one second); this shows whether a difference stays over a longer window.
Per variant: the load client's CPU per delivery (its measured window), and the gateway's per-thread user/system CPU
and write/read syscalls and bytes per delivery (/proc, over the whole client run, its setup included).

  python3 bench/peers/fanout_window.py BUILD [--reps 1] [--subs 1000] [--per-conn 100] [--spacing-ms 5] [--events 4000] [--warm 20] [--variants off,on,pad]
                                         [--node-args=--trace-opt,--trace-deopt] [--keep-logs DIR]

--node-args go to the gateway's node (comma-separated); --keep-logs copies each gateway's output to DIR/VARIANT-REP.log
(with --trace-opt: which functions V8 compiled in which variant)."""
import argparse
import collections
import json
import os
import sys

sys.dont_write_bytecode = True
import otlp_sink  # noqa: E402
from peerslib import BUILD, PEERS, run_json  # noqa: E402


def snap(pid):
    out = collections.Counter()
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            st = open(f"/proc/{pid}/task/{t}/stat").read()
        except FileNotFoundError:
            continue
        f = st[st.rindex(")") + 2:].split()
        key = "main" if int(t) == pid else "other"
        out[f"{key}_user"] += int(f[11])
        out[f"{key}_sys"] += int(f[12])
    for line in open(f"/proc/{pid}/io"):
        k, v = line.split(":")
        if k in ("syscr", "syscw", "rchar", "wchar"):
            out[k] = int(v)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--events", type=int, default=4000)
    ap.add_argument("--variants", default="off,on,pad")
    ap.add_argument("--subs", type=int, default=1000)
    ap.add_argument("--per-conn", type=int, default=100, help="subscribers per connection (1: one connection each)")
    ap.add_argument("--spacing-ms", type=int, default=5, help="between measured events (run_fanout.py: 5 at 1,000 subscribers, 40 at 10,000)")
    ap.add_argument("--warm", type=int, default=20, help="warm-up events before the measured ones (run_fanout.py: 20)")
    ap.add_argument("--node-args", default="")
    ap.add_argument("--keep-logs", default="")
    a = ap.parse_args()
    import perflib  # noqa: E402  (peerslib put the harness on the path)
    from run_fanout import GATEWAY_CONFIG  # noqa: E402

    perflib.MAIN = os.path.abspath(a.build)  # the harness's start_gateway runs $PERF_MAIN, read when it was imported
    os.chdir(PEERS)
    sink = otlp_sink.start()
    for rep in range(a.reps):
        for v in a.variants.split(","):
            if v == "on":
                os.environ["OTEL_TRACES_EXPORTER"] = "otlp"
                os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"http://127.0.0.1:{sink.server_address[1]}/v1/traces"
            else:
                os.environ.pop("OTEL_TRACES_EXPORTER", None)
                os.environ.pop("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None)
            srv = perflib.start_gateway(GATEWAY_CONFIG, extra_node_args=[x for x in a.node_args.split(",") if x])
            try:
                before = snap(srv.pid)
                r = run_json([os.path.join(BUILD, "bin/fanoutload"), "-system", "grpc", "-addr", f"127.0.0.1:{srv.port}", "-subs", str(a.subs),
                              "-conns", str(max(1, a.subs // a.per_conn)), "-events", str(a.events), "-warm", str(a.warm), "-spacing-ms", str(a.spacing_ms), "-server-pid", str(srv.pid),
                              "-size", "330" if v == "pad" else "256", "-label", v], 600)
                d = snap(srv.pid) - before
            finally:
                if a.keep_logs:  # before stop(), which removes the log
                    os.makedirs(a.keep_logs, exist_ok=True)
                    with open(os.path.join(a.keep_logs, f"{v}-{rep}.log"), "w") as f:
                        f.write(srv.text())
                srv.stop()
            n = r["delivered"]
            tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
            row = {"variant": v, "rep": rep, "subs": a.subs, "events": a.events, "cpu_us_per_delivery": r["server_cpu_us_per_delivery"], "msg_bytes": r["delivered_msg_bytes"],
                   **{k: round(d[k] * tick_us / n, 3) for k in ("main_user", "main_sys", "other_user", "other_sys")},
                   **{f"{k}_per_delivery": round(d[k] / n, 3) for k in ("syscw", "wchar", "syscr", "rchar")}, "p50_us": r["p50_us"]}
            print(json.dumps(row), flush=True)
    sink.shutdown()
    print(json.dumps({"otlp_sink": sink.counts}), flush=True)


if __name__ == "__main__":
    main()
