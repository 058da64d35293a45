# The same counts for nats-server under fanoutload -system nats.
# Usage: python3 natscount.py SUBS EVENTS SPACING_MS SUBS_PER_CONN
import os, subprocess, sys, time, json, socket
sys.path.insert(0, "/work/shared/peers")
from perflib import BUILD
subs = int(sys.argv[1]); events = int(sys.argv[2]); spacing = int(sys.argv[3]); per = int(sys.argv[4])
s=socket.socket(); s.bind(("127.0.0.1",0)); p=s.getsockname()[1]; s.close()
srv = subprocess.Popen(["nats-server", "-a", "127.0.0.1", "-p", str(p)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(0.5)
try:
    st = subprocess.Popen(["perf", "stat", "-x,", "-e", "syscalls:sys_enter_write,syscalls:sys_enter_read,syscalls:sys_enter_writev,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_futex,context-switches", "-p", str(srv.pid)], stderr=subprocess.PIPE, text=True)
    argv = [os.path.join(BUILD, "bin/fanoutload"), "-system", "nats", "-addr", f"127.0.0.1:{p}", "-subs", str(subs),
            "-conns", str(subs // per), "-events", str(events), "-spacing-ms", str(spacing), "-server-pid", str(srv.pid), "-label", "perf"]
    def ut(pid):
        f=open(f"/proc/{pid}/stat").read().rsplit(")",1)[1].split()
        return int(f[11]), int(f[12])
    u0,s0=ut(srv.pid)
    o = subprocess.run(argv, capture_output=True, text=True, timeout=900).stdout
    u1,s1=ut(srv.pid)
    st.send_signal(2); err = st.communicate()[1]
    r = json.loads(o.strip().splitlines()[-1])
    d = r["delivered"]
    for line in err.strip().splitlines():
        f = line.split(",")
        if len(f) > 2 and f[0].strip().isdigit(): print(f"{f[2]}: {int(f[0])/d:.3f} per delivery")
    print("user us/delivery %.2f sys us/delivery %.2f (whole run)" % ((u1-u0)*1e4/d, (s1-s0)*1e4/d))
    print({k: r[k] for k in ("server_cpu_us_per_delivery", "deliveries_per_s", "p50_us")})
finally:
    srv.kill()
