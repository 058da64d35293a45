import os, sys
sys.path.insert(0, "/work/shared/peers")
import run_fanout
from perflib import BUILD, run_json
def st(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]), int(f[12])  # utime, stime (ticks)
for system in sys.argv[1].split(","):
    for rep in range(int(sys.argv[2])):
        srv, proto = run_fanout.start(system)
        try:
            argv = [os.path.join(BUILD, "bin/fanoutload"), "-system", proto, "-addr", f"127.0.0.1:{srv.port}", "-subs", "1000", "-conns", "10", "-events", os.environ.get("EVENTS", "1000"), "-spacing-ms", "5", "-server-pid", str(srv.pid), "-label", "x"]
            u0, s0 = st(srv.pid)
            r = run_json(argv, 600)
            u1, s1 = st(srv.pid)
            for l in srv.text().splitlines():
                if "FANOUT" in l or "PROBE" in l: print(l)
        finally:
            srv.stop()
        d = r["delivered"]
        print(f"{system}: deliveries {d}, user {10000*(u1-u0)/d:.2f} us, sys {10000*(s1-s0)/d:.2f} us per delivery (whole run incl. setup); window {r['server_cpu_us_per_delivery']}")
