# CPU of the gateway's main thread and of each other thread inside fanoutload's measured window (per delivery).
# Usage: python3 winsplit.py SUBS EVENTS SPACING_MS SUBS_PER_CONN [node-flag,...]
import os, subprocess, sys, time, json, threading, bisect
sys.path.insert(0, "/work/shared/peers")
from perflib import BUILD, start_gateway
import run_fanout
subs, events, spacing, per = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
extra = [x for x in (sys.argv[5].split(",") if len(sys.argv) > 5 else []) if x]
TICK = 1e6 / os.sysconf("SC_CLK_TCK")
srv = start_gateway(run_fanout.GATEWAY_CONFIG, extra)
samples = []; stop = False
def snap(pid):
    m = o = 0; per = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try: st = open(f"/proc/{pid}/task/{t}/stat").read()
        except FileNotFoundError: continue
        name = st[st.index("(")+1:st.rindex(")")]
        f = st[st.rindex(")") + 2:].split(); v = int(f[11]) + int(f[12])
        per[t + ":" + name] = v
        if int(t) == pid: m += v
        else: o += v
    return m, o, per
def sampler():
    while not stop:
        samples.append((time.monotonic_ns() // 1000, *snap(srv.pid))); time.sleep(0.01)
th = threading.Thread(target=sampler); th.start()
try:
    argv = [os.path.join(BUILD, "bin/fanoutload"), "-system", "grpc", "-addr", f"127.0.0.1:{srv.port}", "-subs", str(subs),
            "-conns", str(subs // per), "-events", str(events), "-spacing-ms", str(spacing), "-server-pid", str(srv.pid), "-label", "w"]
    r = json.loads(subprocess.run(argv, capture_output=True, text=True, timeout=900).stdout.strip().splitlines()[-1])
finally:
    stop = True; th.join(); srv.stop()
ts = [s[0] for s in samples]
a = samples[bisect.bisect_left(ts, r["mono_start_us"])]; b = samples[bisect.bisect_left(ts, r["mono_end_us"]) - 1]
n = r["delivered"]
pa, pb = a[3], b[3]
print({k: round((pb[k]-pa.get(k,0))*TICK/n, 3) for k in pb if pb[k]-pa.get(k,0) > 0})
print(json.dumps({"cpu_us_per_delivery": r["server_cpu_us_per_delivery"], "main_us": round((b[1]-a[1])*TICK/n, 3), "other_us": round((b[2]-a[2])*TICK/n, 3), "window_s": (b[0]-a[0])/1e6}))
