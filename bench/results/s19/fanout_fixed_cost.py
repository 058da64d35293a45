import sys, json, os
sys.path.insert(0, '/work/shared/peers')
import run_fanout
from perflib import BUILD, run_json
def go(subs, events, warm, spacing=5, system="gateway", node_args=()):
    srv, proto = run_fanout.start(system, node_args)
    try:
        conns = max(1, subs // 100)
        argv = [os.path.join(BUILD, "bin/fanoutload"), "-system", proto, "-addr", f"127.0.0.1:{srv.port}", "-subs", str(subs),
                "-conns", str(conns), "-events", str(events), "-spacing-ms", str(spacing), "-server-pid", str(srv.pid), "-warm", str(warm), "-label", "x"]
        r = run_json(argv, timeout=600)
    finally:
        srv.stop()
    cpu_event = r["server_cpu_us_per_delivery"] * subs
    print(json.dumps({"sys": system, "subs": subs, "events": events, "warm": warm, "us_per_delivery": r["server_cpu_us_per_delivery"], "us_per_event": round(cpu_event), "p50_us": r.get("p50_us")}), flush=True)
for a in sys.argv[1:]:
    sysname, subs, events, warm = a.split(":")
    go(int(subs), int(events), int(warm), system=sysname)
