import sys, os, glob, json, time
sys.path.insert(0, "/work/shared/peers")
import perflib
from perflib import Server, start_gateway, free_port, BUILD, run_json
from run_invoke import BACKEND_BIN
perflib.MAIN = sys.argv[1]
calls = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
def threads(pid):
    out = {}
    for t in glob.glob(f"/proc/{pid}/task/*/stat"):
        try: f = open(t).read()
        except OSError: continue
        name = f[f.index("(")+1:f.rindex(")")]
        x = f[f.rfind(")") + 2:].split()
        out[t.split("/")[4]] = (name, int(x[11]) * 10_000, int(x[12]) * 10_000)
    return out
bport = free_port()
backend = Server("backend", [BACKEND_BIN, "-port", str(bport)], port=bport)
gw = start_gateway(f"services:\n  - name: inventory\n    grpc: {{host: 127.0.0.1, port: {bport}}}\n", [a for a in os.environ.get("GWARGS","").split(",") if a])
try:
    for rep in range(4):
        t0 = threads(gw.pid)
        r = run_json([os.path.join(BUILD, "bin/invokeload"), "-conc", "64", "-calls", str(calls), "-rounds", "1", "-warm", "500",
                      "-pid-backend", str(backend.pid), "-pid-gw", str(gw.pid), "-gwrest", f"127.0.0.1:{gw.http_port}"], timeout=600)
        t1 = threads(gw.pid)
        n = calls + 500
        rows = []
        for k, (name, u, s) in t1.items():
            u0, s0 = t0.get(k, (name, 0, 0))[1:]
            if u - u0 + s - s0 > 0: rows.append(f"{name}:{k[-3:]} u{(u-u0)/n:.0f} s{(s-s0)/n:.0f}")
        res = [x for x in r.get("results", [r]) if isinstance(x, dict)]
        print(rep, json.dumps({k: v for k, v in r.items() if not isinstance(v, (list, dict))})[:300])
        print("   ", " | ".join(sorted(rows)))
finally:
    import shutil; shutil.copy(gw.logf.name, "/tmp/s18/rest-trace.log") if os.environ.get("GWARGS") else None; gw.stop(); backend.stop()
