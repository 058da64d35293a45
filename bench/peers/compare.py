#!/usr/bin/env python3
"""No-regression check with the shared peers harness (../shared/peers): the same invoke and fan-out jobs
run on two builds of the gateway, BASE (main before a change) and NEW (with it), alternating per repetition, and the figures are
compared as ratios NEW/BASE of the same repetition.

The harness starts one gateway from $PERF_MAIN per job (its `with_gw1` option only adds a second gateway from the
same checkout with GATEWAY_THREADS=1), so two builds cannot share one run of it; this script runs it as it is, once per
side, with PERF_MAIN switched:

  for each repetition i (the side that goes first alternates with i):
    invoke: run_invoke.py --reps 1 --paths direct,gwgrpc,gwrest,grpcgw --conc 1,64 (BASE, then NEW, or NEW then BASE)
    invoke-sbs: both builds side by side in one run (see run_sbs: the harness's backend and grpcgwproxy, the
                invokeload copy of bench/peers-tls with paths gwgrpc2/gwrest2 for the second gateway)
    fan-out: run_fanout.py --reps 1 --systems gateway --subs 1000 --shapes conn,mux100 (same)

  python3 bench/peers/compare.py --base /tmp/perf/base --new /tmp/perf/new [--reps 6] [--jobs invoke,invoke-sbs,fanout]
      [--subs 1000[,10000]] [--quick] [--gate-busy 0.15] [--gate-load X] [--out DIR] [--tag NAME]
  python3 bench/peers/compare.py --summarize DIR/TAG      # the tables again from the recorded JSON lines

Each checkout must have `npm ci` and `npm run build` done (bench/peers/prepare.sh REF DIR does both). The harness's
Go binaries and backend must be built (its README: ./build.sh, backend/build.sh); its settings (PERF_BUILD,
BACKEND_BIN) come from the environment as in its env.sh.

Quiet-machine gate (bench/peers/peerslib.py): the harness waits for a 1-minute load average below 0.7 before each
repetition; between our alternating jobs that average still holds our own previous job, so instead, before every job,
the machine's busy share is sampled for 5 s and the job waits (bounded, --gate-max-min) until it is below --gate-busy
(default 0.15 = 15% of all cores). --gate-load X adds the harness's load-average condition. The harness itself is
called with --no-wait.

Output: the JSON lines of the harness in DIR/TAG/{invoke,fanout}.jsonl (tags TAG-base / TAG-new), invokeload's in
DIR/TAG/invoke-sbs.jsonl (gw_first: which build was gwgrpc/gwrest), and a markdown
summary on stdout (also DIR/TAG/summary.md): per figure, the median [min-max] of the per-repetition ratios NEW/BASE
and a verdict against a 5% line (costs: ratio <= 1.05; throughput: ratio >= 0.95). grpc-gateway is the same
binary on both sides: its ratios (not judged) show how far the run itself moves a figure."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the repository
from peerslib import PEERS, TLS_BIN, log, run_json, start_backend, start_gateway, start_grpcgw, wait_quiet  # noqa: E402
LIMIT = 0.05


def side_env(a, side):
    """The environment variables --base-env / --new-env give one side's gateway ({OTLP_SINK}: the sink's traces URL)."""
    spec = a.base_env if side == "base" else a.new_env
    out = {}
    for kv in filter(None, (spec or "").split(",")):
        k, _, v = kv.partition("=")
        out[k] = v.replace("{OTLP_SINK}", a.sink_url or "")
    return out


def run_job(a, job, side, rep, outdir):
    if not a.no_gate:
        busy, load, waited = wait_quiet(a.gate_busy, a.gate_load, a.gate_max_min)
        log(f"rep {rep} {job} {side}: busy {busy:.2f}, load {load:.2f} after waiting {waited:.0f} s")
    env = {**os.environ, **side_env(a, side), "PERF_MAIN": a.base if side == "base" else a.new, "PERF_OUT": outdir}
    common = ["--reps", "1", "--rep-base", str(rep), "--no-wait", "--tag", f"{a.tag}-{side}"] + (["--quick"] if a.quick else [])
    if job == "invoke":
        argv = [sys.executable, "run_invoke.py", *common, "--paths", a.paths, "--conc", "1,64", "--out", "invoke.jsonl"]
    else:
        argv = [sys.executable, "run_fanout.py", *common, "--systems", "gateway", "--subs", a.subs, "--shapes", a.shapes,
                "--out", "fanout.jsonl"]
    t0 = time.time()
    subprocess.run(argv, cwd=PEERS, env=env, check=True, timeout=a.job_timeout_s)
    log(f"rep {rep} {job} {side}: {time.time() - t0:.0f} s")


def run_sbs(a, rep, outdir):
    """Side by side: one backend, the BASE and the NEW gateway and the harness's grpcgwproxy running together, one
    invokeload run (bench/peers-tls's copy, paths gwgrpc/gwrest and gwgrpc2/gwrest2) per concurrency, all paths
    interleaved in blocks. Which build is `gw` and which `gw2` alternates per repetition (a block's predecessor in the
    rotation is then not always the same)."""
    if not a.no_gate:
        busy, load, waited = wait_quiet(a.gate_busy, a.gate_load, a.gate_max_min)
        log(f"rep {rep} invoke-sbs: busy {busy:.2f}, load {load:.2f} after waiting {waited:.0f} s")
    first = "base" if rep % 2 == 0 else "new"
    sides = ["base", "new"] if first == "base" else ["new", "base"]
    dirs = [a.base if s == "base" else a.new for s in sides]
    procs = []
    t0 = time.time()
    try:
        backend = start_backend()
        bport = backend.port
        procs.append(backend)
        gw = start_gateway(dirs[0], bport, name="gateway-1", env=side_env(a, sides[0]))
        procs.append(gw)
        gw2 = start_gateway(dirs[1], bport, name="gateway-2", env=side_env(a, sides[1]))
        procs.append(gw2)
        grpcgw = start_grpcgw(bport)
        procs.append(grpcgw)
        for conc in (1, 64):
            # the harness's counts (run_invoke.py)
            if conc == 1:
                calls, rounds, warm = (100, 2, 50) if a.quick else (300, 4, 200)
            else:
                calls, rounds, warm = (1000, 2, 200) if a.quick else (3000, 3, 500)
            argv = [os.path.join(TLS_BIN, "invokeload"), "-conc", str(conc), "-calls", str(calls), "-rounds", str(rounds), "-warm", str(warm),
                    "-pid-backend", str(backend.pid), "-pid-gw", str(gw.pid), "-pid-gw2", str(gw2.pid), "-pid-grpcgw", str(grpcgw.pid),
                    "-direct", f"127.0.0.1:{bport}", "-gwgrpc", f"127.0.0.1:{gw.port}", "-gwrest", f"127.0.0.1:{gw.http_port}",
                    "-gwgrpc2", f"127.0.0.1:{gw2.port}", "-gwrest2", f"127.0.0.1:{gw2.http_port}", "-grpcgw", f"127.0.0.1:{grpcgw.port}"]
            r = run_json(argv, timeout=900)
            r.update({"tag": a.tag, "rep": rep, "gw_first": first, "time": time.strftime("%Y-%m-%dT%H:%M:%S")})
            with open(os.path.join(outdir, "invoke-sbs.jsonl"), "a") as f:
                f.write(json.dumps(r) + "\n")
            bad = [f"{n}: {p['errors']} errors, {p['first_error'][:200]}" for n, p in r["paths"].items() if p["errors"]]
            if bad:
                log(f"rep {rep} invoke-sbs c={conc}: " + "; ".join(bad))
    finally:
        for p in reversed(procs):
            p.stop()
    log(f"rep {rep} invoke-sbs: {time.time() - t0:.0f} s")


def fmt(xs, nd=2):
    xs = [x for x in xs if x == x]
    return f"{statistics.median(xs):.{nd}f} [{min(xs):.{nd}f}-{max(xs):.{nd}f}]" if xs else "n/a"


def verdict(ratios, cost):
    xs = [x for x in ratios if x == x]
    if not xs:
        return "n/a"
    m = statistics.median(xs)
    ok = m <= 1 + LIMIT if cost else m >= 1 - LIMIT
    return "ok" if ok else "**REGRESSION**"


def load_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def ratio(n, b):
    return n / b if b else float("nan")


# (figure, concurrency, function of (path figures, direct figures), True: a cost / False: a throughput / None: shown,
# not judged: a p99 of 1,200 calls and a CPU figure that at c=1 is mostly the process's idle work move by more than 5%
# between identical runs)
FIGS = [
    ("c=1 added p50 us", 1, lambda p, d: p["p50_us"] - d["p50_us"], True),
    ("c=1 added p99 us", 1, lambda p, d: p["p99_us"] - d["p99_us"], None),
    ("c=64 calls/s", 64, lambda p, d: p["rps"], False),
    ("c=64 proxy CPU us/call", 64, lambda p, d: p["proxy_cpu_us_per_call"], True),
    ("c=1 proxy CPU us/call", 1, lambda p, d: p["proxy_cpu_us_per_call"], None),
]


def invoke_table(by, title, control=True):
    """by: (rep, conc, side) -> {path: figures}; one row per path and figure."""
    names = {"gwgrpc": "gRPC InvokeJson", "gwrest": "REST invoke-json"}
    if control:
        names["grpcgw"] = "grpc-gateway (control)"
    reps = sorted({k[0] for k in by})
    both = len([r for r in reps if all((r, c, s) in by for c in (1, 64) for s in ("base", "new"))])
    lines = [title, "", f"Repetitions with both sides: {both}", "",
             "| path | figure | base | new | new/base per rep | within 5% |", "|---|---|---:|---:|---:|---|"]
    for path, label in names.items():
        for fname, conc, f, cost in FIGS:
            bv, nv, rs = [], [], []
            for rep in reps:
                b, n = by.get((rep, conc, "base")), by.get((rep, conc, "new"))
                if not b or not n or not b.get(path) or not n.get(path):
                    continue
                x, y = f(b[path], b["direct"]), f(n[path], n["direct"])
                bv.append(x)
                nv.append(y)
                rs.append(ratio(y, x))
            if rs:
                nd = 0 if "us" in fname or "/s" in fname else 2
                judged = verdict(rs, cost) if path != "grpcgw" and cost is not None else "-"
                lines.append(f"| {label} | {fname} | {fmt(bv, nd)} | {fmt(nv, nd)} | {fmt(rs)} | {judged} |")
    return lines + [""]


def summarize(outdir, tag):
    lines = []
    inv = load_jsonl(os.path.join(outdir, "invoke.jsonl"))
    by = {}
    for r in inv:
        side = r["tag"].rsplit("-", 1)[-1]
        if r["tag"] == f"{tag}-{side}":
            by[(r["rep"], r["conc"], side)] = r["paths"]
    if by:
        lines += invoke_table(by, "## Invoke (../shared/peers run_invoke.py, PutItem ~1 KB JSON): NEW / BASE, separate runs alternating")
    sbs = {}
    for r in load_jsonl(os.path.join(outdir, "invoke-sbs.jsonl")):
        if r["tag"] != tag:
            continue
        p = r["paths"]
        one, two = ("base", "new") if r["gw_first"] == "base" else ("new", "base")
        common = {k: p[k] for k in ("direct", "grpcgw") if k in p}
        sbs[(r["rep"], r["conc"], one)] = {**common, "gwgrpc": p.get("gwgrpc"), "gwrest": p.get("gwrest")}
        sbs[(r["rep"], r["conc"], two)] = {**common, "gwgrpc": p.get("gwgrpc2"), "gwrest": p.get("gwrest2")}
    if sbs:
        lines += invoke_table(sbs, "## Invoke side by side (one backend, both gateways and grpc-gateway running together, one load run, "
                              "blocks interleaved): NEW / BASE",
                              control=False)
    fan = load_jsonl(os.path.join(outdir, "fanout.jsonl"))
    fby = {}
    for r in fan:
        side = r["tag"].rsplit("-", 1)[-1]
        if r["tag"] == f"{tag}-{side}":
            fby[(r["rep"], r.get("subs"), r.get("shape"), side)] = r
    if fan:
        lines += ["## Fan-out (../shared/peers run_fanout.py, gateway gRPC Subscribe, 256 B events): NEW / BASE, same repetition", "",
                  "| subscribers | shape | figure | base | new | new/base per rep | within 5% |", "|---:|---|---|---:|---:|---:|---|"]
        keys = sorted({(k[1], k[2]) for k in fby if k[1] is not None})
        reps = sorted({k[0] for k in fby})
        for subs, shape in keys:
            for fname, key, cost in (("CPU us/delivery", "server_cpu_us_per_delivery", True), ("deliveries/s", "deliveries_per_s", False),
                                     ("p50 us", "p50_us", True)):
                bv, nv, rs, errs = [], [], [], 0
                for rep in reps:
                    b, n = fby.get((rep, subs, shape, "base")), fby.get((rep, subs, shape, "new"))
                    if not b or not n:
                        continue
                    if "error" in b or "error" in n:
                        errs += 1
                        continue
                    bv.append(b[key])
                    nv.append(n[key])
                    rs.append(ratio(n[key], b[key]))
                nd = 2 if "delivery" in fname else 0
                v = "-" if fname == "p50 us" else verdict(rs, cost)
                lines.append(f"| {subs:,} | {shape} | {fname} | {fmt(bv, nd)} | {fmt(nv, nd)} | {fmt(rs)} | {v}{f' ({errs} failed)' if errs else ''} |")
        lines.append("")
        lines.append("Deliveries/s is bounded by the offered rate (200,000/s at 1,000 subscribers); p50 is shown, not judged.")
        lines.append("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="/tmp/perf/base", help="built checkout before the change (bench/peers/prepare.sh REF DIR)")
    ap.add_argument("--new", default="/tmp/perf/new", help="checkout of the change, built")
    ap.add_argument("--reps", type=int, default=6, help="an even count lets each side go first equally often")
    ap.add_argument("--jobs", default="invoke,invoke-sbs,fanout", help="invoke (harness, alternating runs), invoke-sbs (side by side), fanout")
    ap.add_argument("--paths", default="direct,gwgrpc,gwrest,grpcgw",
                    help="run_invoke.py paths (direct is needed for added latency; grpcgw, the same binary on both sides, is the control)")
    ap.add_argument("--subs", default="1000")
    ap.add_argument("--shapes", default="conn,mux100")
    ap.add_argument("--quick", action="store_true", help="the harness's short counts (smoke test; figures are noisy)")
    ap.add_argument("--gate-busy", type=float, default=0.15, help="start a job only when the machine is less busy than this (0-1)")
    ap.add_argument("--gate-load", type=float, default=None, help="and the 1-minute load average is below this")
    ap.add_argument("--gate-max-min", type=float, default=90)
    ap.add_argument("--no-gate", action="store_true", help="skip the gate (smoke tests only)")
    ap.add_argument("--job-timeout-s", type=float, default=1800)
    ap.add_argument("--out", default="/tmp/perf/compare", help="results go to OUT/TAG/ (not $PERF_OUT: env.sh points that into the harness)")
    ap.add_argument("--tag", default=time.strftime("cmp-%Y%m%dT%H%M%S"))
    ap.add_argument("--summarize", metavar="DIR/TAG", help="only print the summary of a recorded run")
    ap.add_argument("--base-env", help="K=V,... for the BASE side's gateway (e.g. the same build with tracing on as NEW: "
                    "--new-env OTEL_TRACES_EXPORTER=otlp,OTEL_EXPORTER_OTLP_TRACES_ENDPOINT={OTLP_SINK}; {OTLP_SINK} starts a sink)")
    ap.add_argument("--new-env", help="K=V,... for the NEW side's gateway")
    a = ap.parse_args()
    if a.summarize:
        d = a.summarize.rstrip("/")
        print(summarize(d, os.path.basename(d)))
        return
    for side, d in (("base", a.base), ("new", a.new)):
        if not os.path.exists(os.path.join(d, "dist/src/main/cli.js")):
            raise SystemExit(f"--{side} {d}: no dist/src/main/cli.js (run bench/peers/prepare.sh REF {d})")
    if not os.path.exists(os.path.join(PEERS, "run_invoke.py")):
        raise SystemExit(f"no peers harness at {PEERS} (set PEERS_DIR)")
    jobs = a.jobs.split(",")
    if set(jobs) - {"invoke", "invoke-sbs", "fanout"}:
        raise SystemExit(f"--jobs: unknown {sorted(set(jobs) - {'invoke', 'invoke-sbs', 'fanout'})}")
    if "invoke-sbs" in jobs and not os.path.exists(os.path.join(TLS_BIN, "invokeload")):
        raise SystemExit(f"invoke-sbs needs {TLS_BIN}/invokeload: run bench/peers-tls/build.sh")
    outdir = os.path.join(a.out, a.tag)
    os.makedirs(outdir, exist_ok=True)
    a.sink_url, sink = None, None
    if "{OTLP_SINK}" in (a.base_env or "") + (a.new_env or ""):
        # an OTLP/HTTP receiver that answers every export and keeps nothing (a traced gateway needs somewhere to send)
        sink = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "otlp_sink.py")], stdout=subprocess.PIPE, text=True)
        a.sink_url = f"http://127.0.0.1:{sink.stdout.readline().strip()}/v1/traces"
        log(f"OTLP sink at {a.sink_url}")
    t0 = time.time()
    try:
        for rep in range(a.reps):
            order = ["base", "new"] if rep % 2 == 0 else ["new", "base"]
            for job in jobs:
                if job == "invoke-sbs":
                    run_sbs(a, rep, outdir)
                    continue
                for side in order:
                    run_job(a, job, side, rep, outdir)
    finally:
        if sink:
            sink.terminate()
            try:
                log(f"OTLP sink received {sink.communicate(timeout=10)[0].strip()}")
            except subprocess.TimeoutExpired:
                sink.kill()
    text = summarize(outdir, a.tag)
    text += f"\nBASE {a.base}, NEW {a.new}, {a.reps} repetitions{' (--quick)' if a.quick else ''}, {time.time() - t0:.0f} s.\n"
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(text)
    print(text)
    log(f"results in {outdir}")


if __name__ == "__main__":
    main()
