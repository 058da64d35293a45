import sys, json, os
sys.path.insert(0, '/work/shared/peers')
import run_fanout
from perflib import BUILD, run_json
def go(subs, shape, warm, node_args, events=200, spacing=5):
    srv, proto = run_fanout.start("gateway", node_args)
    try:
        conns = subs if shape == "conn" else max(1, subs // 100)
        argv = [os.path.join(BUILD, "bin/fanoutload"), "-system", proto, "-addr", f"127.0.0.1:{srv.port}", "-subs", str(subs),
                "-conns", str(conns), "-events", str(events), "-spacing-ms", str(spacing), "-server-pid", str(srv.pid), "-warm", str(warm), "-label", "x"]
        r = run_json(argv, timeout=600)
    finally:
        srv.stop()
    print(json.dumps({"budget": node_args[0].split("=")[1] if node_args else "8448", "subs": subs, "shape": shape, "us_per_delivery": r["server_cpu_us_per_delivery"], "p50_us": round(r.get("p50_us")), "dps": round(r["deliveries_per_s"])}), flush=True)
budgets = [(), ("--interrupt-budget=16896",), ("--interrupt-budget=33792",), ("--interrupt-budget=67584",)]
cases = [(1000, "mux100", 200, 5), (1000, "conn", 200, 5), (10000, "mux100", 60, 40)]
for rep in range(2):
    for (subs, shape, ev, sp) in cases:
        for b in budgets:
            go(subs, shape, 20, b, ev, sp)
