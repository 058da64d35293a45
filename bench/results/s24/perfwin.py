"""perf record of one gateway (or nats) over a run_fanout-style mux100 run; samples split by thread and symbol,
only those inside fanoutload's measured window (perf clock = CLOCK_MONOTONIC)."""
import os, sys, subprocess, signal, time, collections, json
sys.path.insert(0, "/work/shared/peers")
import run_fanout, perflib
from perflib import BUILD, run_json
system = sys.argv[1] if len(sys.argv) > 1 else "gateway"
subs = int(os.environ.get("SUBS", "1000")); conns = int(os.environ.get("CONNS", str(max(1, subs // 100))))
events = int(os.environ.get("EVENTS", "200"))
node_args = ["--perf-basic-prof-only-functions"] + os.environ.get("NODE_ARGS", "").split()
node_args = [a for a in node_args if a]
srv, proto = run_fanout.start(system, node_args) if system == "gateway" else run_fanout.start(system)
out = f"/tmp/s24/perf-{system}.data"
try:
    time.sleep(1)
    for _ in range(int(os.environ.get("PRE", "0"))):
        run_json([os.path.join(BUILD, "bin/fanoutload"), "-system", proto, "-addr", f"127.0.0.1:{srv.port}", "-subs", str(subs), "-conns", str(conns), "-events", str(events), "-spacing-ms", "5", "-server-pid", str(srv.pid), "-label", "x"], 600)
    pr = subprocess.Popen(["perf", "record", "-F", "4999", "-g", "-k", "CLOCK_MONOTONIC", "-p", str(srv.pid), "-o", out], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    argv = [os.path.join(BUILD, "bin/fanoutload"), "-system", proto, "-addr", f"127.0.0.1:{srv.port}", "-subs", str(subs), "-conns", str(conns), "-events", str(events), "-spacing-ms", "5", "-server-pid", str(srv.pid), "-label", "x"]
    r = run_json(argv, 600)
    pr.send_signal(signal.SIGINT); pr.wait(30)
finally:
    srv.stop()
t0, t1 = r["mono_start_us"] / 1e6, r["mono_end_us"] / 1e6
open("/tmp/s24/window-"+system+".txt","w").write(f"{t0:.6f},{t1:.6f}")
print(json.dumps({k: r[k] for k in ("delivered", "server_cpu_us_per_delivery")}))
ps = subprocess.run(["perf", "script", "-i", out, "--time", f"{t0:.6f},{t1:.6f}", "-F", "comm,tid,time,ip,sym,dso"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
# samples: header line then stack lines, blank separator
by_thread, by_leaf, by_frame = collections.Counter(), collections.Counter(), collections.Counter()
n = 0
for block in ps.split("\n\n"):
    lines = [l for l in block.splitlines() if l.strip()]
    if not lines: continue
    n += 1
    comm = lines[0].split()[0]
    by_thread[comm] += 1
    stack = [l.strip().split(None, 1)[1] if len(l.strip().split(None, 1)) > 1 else l for l in lines[1:]]
    if stack:
        by_leaf[(comm, stack[0][:110])] += 1
    seen = set()
    for f in stack:
        f = f[:110]
        if f not in seen:
            seen.add(f); by_frame[(comm, f)] += 1
print("samples", n, "delivered", r["delivered"], "-> us per delivery at 4999 Hz:", round(n / 4999 * 1e6 / r["delivered"], 3))
for k, v in by_thread.most_common(): print(f"{v:6d} {k}")
print("--- leaf")
for (c, s), v in by_leaf.most_common(int(os.environ.get("TOP", "45"))): print(f"{v:6d} {c[:12]:12s} {s}")
print("--- inclusive (main thread)")
for (c, s), v in by_frame.most_common(400):
    if c in ("node", "nats-server") and v > n * 0.02: print(f"{v:6d} {s}")
