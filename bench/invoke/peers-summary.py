#!/usr/bin/env python3
"""Summarize A/B runs of ../shared/peers/run_invoke.py (bench/invoke/peers-ab.sh): per tag, concurrency and gateway path,
the median [min-max] over repetitions of the figures the issue asks for, each one a ratio or difference against
grpc-gateway measured in the same run (same Go load client, same repetition).

  python3 bench/invoke/peers-summary.py RESULTS.jsonl"""
import json
import statistics
import sys
from collections import defaultdict


def fmt(xs, nd=2):
    return f"{statistics.median(xs):.{nd}f} [{min(xs):.{nd}f}-{max(xs):.{nd}f}]" if xs else "n/a"


rows = defaultdict(lambda: defaultdict(list))
for line in open(sys.argv[1]):
    r = json.loads(line)
    p = r["paths"]
    d, g = p.get("direct"), p.get("grpcgw")
    for path in ("gwrest", "gwgrpc", "passthru"):
        if path not in p or not g or not d:
            continue
        x, k = p[path], (r["tag"], r["conc"], path)
        rows[k]["rps_ratio"].append(x["rps"] / g["rps"])
        rows[k]["rps"].append(x["rps"])
        rows[k]["grpcgw_rps"].append(g["rps"])
        rows[k]["cpu_ratio"].append(x["proxy_cpu_us_per_call"] / g["proxy_cpu_us_per_call"] if g["proxy_cpu_us_per_call"] else float("nan"))
        rows[k]["cpu"].append(x["proxy_cpu_us_per_call"])
        rows[k]["client_cpu"].append(x["client_cpu_us_per_call"])
        rows[k]["added_p50"].append(x["p50_us"] - d["p50_us"])
        rows[k]["grpcgw_added_p50"].append(g["p50_us"] - d["p50_us"])
        rows[k]["p99_ratio"].append(x["p99_us"] / g["p99_us"])

print("| tag | c | path | n | calls/s vs grpc-gateway | gateway calls/s | grpc-gateway calls/s | CPU/call us | CPU/call vs grpc-gateway | Go client CPU/call us | added p50 us | grpc-gateway added p50 us | p99 vs grpc-gateway |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for (tag, conc, path), v in sorted(rows.items()):
    print(f"| {tag} | {conc} | {path} | {len(v['rps'])} | {fmt(v['rps_ratio'])} | {fmt(v['rps'], 0)} | {fmt(v['grpcgw_rps'], 0)} | {fmt(v['cpu'], 0)} | {fmt(v['cpu_ratio'])} | "
          f"{fmt(v['client_cpu'], 0)} | {fmt(v['added_p50'], 0)} | {fmt(v['grpcgw_added_p50'], 0)} | {fmt(v['p99_ratio'])} |")
