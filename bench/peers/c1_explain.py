#!/usr/bin/env python3
"""What V8 was doing during each slow call of a c=1 run: reads the per-call dumps (repN.csv) and gateway logs (gwN.log)
that `c1_calls.py` writes when NODE is bench/peers/node-v8-trace.sh (V8's --trace-opt, --trace-deopt and --trace-gc,
each line stamped with the wall clock), and for each gateway path counts the calls over `--slow-us` that overlap a
TurboFan compilation job (from "compiling method" to "completed compiling", listed by function), a collection
(its pause, ending at its trace line), or a deoptimization, against how many of all calls overlap one. Only what
happened after `gateway listening` counts. Lines of every isolate (the main thread and the uWS threads) are read alike:
a REST call's compilation may be another thread's.

  NODE=bench/peers/node-v8-trace.sh python3 bench/peers/c1_calls.py --main B --reps 3 --out DIR
  python3 bench/peers/c1_explain.py --out DIR [--reps 3] [--slow-us 1500] [--paths gwgrpc,gwrest] [--list]
"""
import argparse
import collections
import csv
import os
import re

COMPILE_START = re.compile(r"\[compiling method (0x[0-9a-f]+) <JSFunction ([^ >]*)")
COMPILE_DONE = re.compile(r"\[completed compiling (0x[0-9a-f]+) ")
GC = re.compile(r"ms: (Scavenge|Mark-Compact|Mark-Sweep|Minor Mark-Sweep)[^,]*, ([0-9.]+) / ")
DEOPT = re.compile(r"\[bailout \(kind: ([^,]*), reason: ([^)]*)\).*?<JSFunction ([^ >]*)")


def events(log):
    """(start_us, end_us, kind, what) of every compilation job, collection and deoptimization after listening."""
    out, started, listening = [], {}, False
    for line in open(log, errors="replace"):
        stamp, _, text = line.partition(" ")
        try:
            t = float(stamp) * 1e6
        except ValueError:
            continue
        if not listening:
            listening = "gateway listening" in text
            continue
        m = COMPILE_START.search(text)
        if m:
            started[m.group(1)] = (t, m.group(2) or "(anonymous)")
            continue
        m = COMPILE_DONE.search(text)
        if m and m.group(1) in started:
            t0, name = started.pop(m.group(1))
            out.append((t0, t, "compile", name))
            continue
        m = GC.search(text)
        if m:
            out.append((t - float(m.group(2)) * 1000, t, "gc", m.group(1)))
            continue
        m = DEOPT.search(text)
        if m:
            out.append((t, t, "deopt", f"{m.group(3) or '(anonymous)'} ({m.group(2)})"))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--slow-us", type=int, default=1500)
    ap.add_argument("--paths", default="gwgrpc,gwrest")
    ap.add_argument("--list", action="store_true", help="list each slow call with what overlapped it")
    a = ap.parse_args()
    paths = a.paths.split(",")
    tally = {p: collections.Counter() for p in paths}
    names = {p: collections.Counter() for p in paths}
    for rep in range(a.reps):
        csv_path, log = os.path.join(a.out, f"rep{rep}.csv"), os.path.join(a.out, f"gw{rep}.log")
        if not (os.path.exists(csv_path) and os.path.exists(log)):
            continue
        ev = events(log)
        for row in csv.reader(open(csv_path)):
            if len(row) != 5 or row[0] not in tally:
                continue
            p, rnd, us, start = row[0], int(row[1]), int(row[3]), int(row[4])
            # 200 us either side: a stamp is taken when the line is written, not when the work began or ended.
            over = [e for e in ev if e[0] <= start + us + 200 and e[1] >= start - 200]
            kinds = {e[2] for e in over}
            slow = us > a.slow_us
            t = tally[p]
            t["calls"] += 1
            t["slow"] += slow
            for k in ("compile", "gc", "deopt"):
                if k in kinds:
                    t[f"all {k}"] += 1
                    t[f"slow {k}"] += slow
            if not kinds:
                t["slow none"] += slow
            if slow:
                for e in over:
                    if e[2] == "compile":
                        names[p][e[3]] += 1
                if a.list:
                    print(f"rep {rep} {p} round {rnd} {us} us: {[f'{e[2]} {e[3]}' for e in over]}")
    for p in paths:
        t = tally[p]
        if t["calls"] == 0:
            continue
        share = lambda k: f"{t[f'slow {k}']} ({t[f'slow {k}'] / max(1, t['slow']):.0%}) of slow calls, {t[f'all {k}']} ({t[f'all {k}'] / t['calls']:.1%}) of all"
        print(f"{p}: {t['slow']} of {t['calls']} calls over {a.slow_us} us")
        for k in ("compile", "gc", "deopt"):
            print(f"  overlapping a {k:7s}: {share(k)}")
        print(f"  overlapping nothing: {t['slow none']} of slow calls")
        print(f"  compilations during slow calls: {', '.join(f'{n} {c}' for n, c in names[p].most_common(15))}")


if __name__ == "__main__":
    main()
