import os, sys, json
sys.path.insert(0, "/work/shared/peers")
import run_fanout
from perflib import BUILD, run_json
subs=int(os.environ.get("SUBS","10")); conns=int(os.environ.get("CONNS","1")); ev=int(os.environ.get("EVENTS","1000")); sp=os.environ.get("SPACING","5")
for system in sys.argv[1].split(","):
    srv, proto = run_fanout.start(system, [a for a in os.environ.get("NODE_ARGS","").split() if a]) if system == "gateway" else run_fanout.start(system)
    try:
      if os.environ.get("PIN"):
        import subprocess as sp_
        sp_.run(["taskset", "-a", "-pc", "0", str(srv.pid)], stdout=sp_.DEVNULL)
      for k in range(int(os.environ.get("REPEAT","1"))):
        import glob
        def thr(pid):
            o={}
            for t in glob.glob(f"/proc/{pid}/task/*/stat"):
                try: f=open(t).read()
                except OSError: continue
                x=f[f.rfind(")")+2:].split(); o[t.split("/")[4]]=(f[f.find("(")+1:f.rfind(")")], int(x[11]), int(x[12]))
            return o
        t0 = thr(srv.pid)
        f0 = open(f"/proc/{srv.pid}/stat").read().rsplit(")", 1)[1].split()
        r = run_json((["taskset", "-c", "1"] if os.environ.get("PIN") else []) + [os.path.join(BUILD, "bin/fanoutload"), "-system", proto, "-addr", f"127.0.0.1:{srv.port}", "-subs", str(subs), "-conns", str(conns), "-events", str(ev), "-spacing-ms", sp, "-server-pid", str(srv.pid), "-label", "x"], 600)
        t1 = thr(srv.pid)
        print("   threads:", sorted([(t1[k][0], t1[k][1]-t0[k][1], t1[k][2]-t0[k][2]) for k in t1 if k in t0 and t1[k][1]+t1[k][2]-t0[k][1]-t0[k][2] > 0], key=lambda x: -x[1]-x[2]))
        f1 = open(f"/proc/{srv.pid}/stat").read().rsplit(")", 1)[1].split()
        print("   user us/event", round((int(f1[11])-int(f0[11]))*1e4/ev,1), "sys us/event", round((int(f1[12])-int(f0[12]))*1e4/ev,1))
        print(system, k, "cpu us per event", round(r["server_cpu_us"]/ev,1), "per delivery", r["server_cpu_us_per_delivery"], "p50", r.get("p50_us"))
    finally:
        srv.stop()
    print(system, "cpu us per event", round(r["server_cpu_us"]/ev,1), "per delivery", r["server_cpu_us_per_delivery"], "p50", r.get("p50_ms"), r.get("p50_us"))
