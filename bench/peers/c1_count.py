#!/usr/bin/env python3
"""Count, per arm, how often the gateway's c=1 added p99 is at or below grpc-gateway's in the same repetition, over a
file of alternated `c1_calls.py` runs, each run's output preceded by a line `=== round N env ARM ...` (ARM: a build
path or an environment setting; the last path component names it):

  for r in 1 2 3 4 5; do for b in /tmp/perf/A /tmp/perf/B; do
    echo "=== round $r env $b" >> OUT; python3 bench/peers/c1_calls.py --main $b --reps 3 >> OUT; done; done
  python3 bench/peers/c1_count.py OUT [OUT2 ...]

Prints per arm: gRPC and REST `k/n` (at or below grpc-gateway's), their added p99 range and median, and
grpc-gateway's."""
import collections
import re
import sys

sys.dont_write_bytecode = True


def count(path):
    arm = None
    rows = collections.defaultdict(lambda: collections.defaultdict(list))
    for line in open(path):
        m = re.match(r"=== round (\d+) env (\S+)", line)
        if m:
            arm = m.group(2).rstrip("/").split("/")[-1]
            continue
        m = re.match(r"(\w+): added p50 \[([^\]]*)\] us, p99 \[([^\]]*)\]", line)
        if m and arm:
            rows[arm][m.group(1)].extend(int(x) for x in m.group(3).split(","))
    print("##", path)
    for arm, d in rows.items():
        g = d["grpcgw"]
        out = [f"{arm:24s}"]
        for p in ("gwgrpc", "gwrest"):
            v = d[p]
            if not v or not g:
                continue
            n = sum(1 for a, b in zip(v, g) if a <= b)
            out.append(f"{p} {n}/{len(v)} {min(v)}-{max(v)} us, median {sorted(v)[len(v) // 2]}")
        if g:
            out.append(f"grpcgw {min(g)}-{max(g)} us, median {sorted(g)[len(g) // 2]}")
        print(" | ".join(out))


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) > 1 else 2)
    for f in sys.argv[1:]:
        count(f)
