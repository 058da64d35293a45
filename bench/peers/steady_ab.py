#!/usr/bin/env python3
"""Warm invoke, A against B: two gateways on the harness's backend, each given 20,000 calls of warm-up, then measured
in interleaved blocks of one invokeload run (bench/peers-tls's, paths gwgrpc and gwgrpc2, or gwrest and gwrest2), so
both see the same minutes of the box. Fresh gateways per repetition; which one is the run's first path alternates,
because the second path of a rotation reads some 10% more CPU per call whatever it is. Prints each repetition's gateway
CPU per call and, at the end, the median of the per-repetition ratios B/A.

  python3 bench/peers/steady_ab.py --a BUILD --b BUILD [--b-env K=V,...] [--otlp-b] [--path gwgrpc|gwrest]
                                   [--reps 8] [--calls 8000] [--rounds 4] [--warm 20000] [--conc 64]

--otlp-b traces B at 100% to an OTLP sink (bench/peers/otlp_sink.py, in this process); --b-env sets B's environment
(e.g. SCRATCH_V8=... for a scratch build). A and B may be the same build."""
import argparse
import json
import os
import statistics
import sys

sys.dont_write_bytecode = True
import otlp_sink  # noqa: E402
from peerslib import PEERS, TLS_BIN, environment, run_json, start_backend  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--b-env", default="")
    ap.add_argument("--otlp-b", action="store_true")
    ap.add_argument("--path", choices=("gwgrpc", "gwrest"), default="gwgrpc")
    ap.add_argument("--reps", type=int, default=8)
    ap.add_argument("--calls", type=int, default=8000)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--warm", type=int, default=20000)
    ap.add_argument("--conc", type=int, default=64)
    a = ap.parse_args()
    import perflib  # noqa: E402

    sink = otlp_sink.start()
    env_b = dict(kv.split("=", 1) for kv in a.b_env.split(",") if kv)
    if a.otlp_b:
        env_b.update({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{sink.server_address[1]}/v1/traces"})
    os.chdir(PEERS)
    backend = start_backend()
    cfg = f"services:\n  - name: inventory\n    grpc: {{host: 127.0.0.1, port: {backend.port}}}\n"

    def start(side):
        perflib.MAIN = os.path.abspath(a.a if side == "a" else a.b)
        with environment(env_b if side == "b" else {}):
            return perflib.start_gateway(cfg, name=f"gateway-{side}")

    cpu = {"a": [], "b": []}
    try:
        for rep in range(a.reps):
            order = ("a", "b") if rep % 2 == 0 else ("b", "a")
            gws = {side: start(side) for side in order}
            try:
                first, second = gws[order[0]], gws[order[1]]
                port = (lambda g: g.port) if a.path == "gwgrpc" else (lambda g: g.http_port)
                r = run_json([os.path.join(TLS_BIN, "invokeload"), "-conc", str(a.conc), "-calls", str(a.calls), "-rounds", str(a.rounds),
                              "-warm", str(a.warm), "-pid-backend", str(backend.pid), "-pid-gw", str(first.pid), "-pid-gw2", str(second.pid),
                              f"-{a.path}", f"127.0.0.1:{port(first)}", f"-{a.path}2", f"127.0.0.1:{port(second)}"], 900)
            finally:
                for g in gws.values():
                    g.stop()
            for side, key in ((order[0], a.path), (order[1], a.path + "2")):
                p = r["paths"][key]
                if p["errors"]:
                    raise SystemExit(f"{side}: {p['errors']} errors: {p['first_error'][:200]}")
                cpu[side].append(p["proxy_cpu_us_per_call"])
            print(json.dumps({"rep": rep, "first": order[0], "a_us": cpu["a"][-1], "b_us": cpu["b"][-1], "b_over_a": round(cpu["b"][-1] / cpu["a"][-1], 3)}), flush=True)
    finally:
        backend.stop()
        sink.shutdown()
    ratios = [b / x for x, b in zip(cpu["a"], cpu["b"])]
    print(json.dumps({"path": a.path, "reps": a.reps, "a_median_us": statistics.median(cpu["a"]), "b_median_us": statistics.median(cpu["b"]),
                      "b_over_a_median": round(statistics.median(ratios), 3), "b_over_a_range": [round(min(ratios), 3), round(max(ratios), 3)],
                      "otlp_sink": sink.counts}))


if __name__ == "__main__":
    main()
