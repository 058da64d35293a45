import os, sys, glob
sys.path.insert(0, "/work/shared/peers")
from perflib import BUILD, Server, free_port, run_json, start_gateway, BACKEND_BIN
d = sys.argv[1]; calls = sys.argv[2]
os.makedirs(d, exist_ok=True)
for f in glob.glob(d + "/*.cpuprofile"): os.unlink(f)
prof = [] if os.environ.get("NOPROF") else ["--cpu-prof", f"--cpu-prof-dir={d}"]
bport = free_port()
backend = Server("backend", [BACKEND_BIN, "-port", str(bport)], port=bport)
try:
    srv = start_gateway(f"services:\n  - name: inventory\n    grpc: {{host: 127.0.0.1, port: {bport}}}\n", prof)
    try:
        r = run_json([os.path.join(BUILD, "bin/invokeload"), "-conc", "64", "-calls", calls, "-rounds", "1", "-warm", os.environ.get("WARM", "5000"), "-gwgrpc", f"127.0.0.1:{srv.port}", "-pid-gw", str(srv.pid)], 600)
        v = r["paths"]["gwgrpc"]; print(f"{v['rps']:.0f}/s, {v['proxy_cpu_us_per_call']:.1f} us/call", r.get("mono_start_us"), r.get("mono_end_us"))
    finally:
        srv.stop()
finally:
    backend.stop()
