# Socket calls and user/system CPU per delivery of a server under the peers harness' fanoutload, over the whole run
# (setup included): the gateway (PERF_MAIN, a built clone) or nats-server.
# Usage (env from ../shared/peers/env.sh): python3 syscount.py gateway|nats SUBS EVENTS SPACING_MS SUBS_PER_CONN
import json, os, subprocess, sys
sys.path.insert(0, "/work/shared/peers")
from perflib import BUILD

system = sys.argv[1]
subs, events, spacing, per = (int(x) for x in sys.argv[2:6])
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../peers"))
from fanout_rate import start_server  # noqa: E402

pid, port, load, stop = start_server(system, os.environ.get("PERF_MAIN", "/tmp/perf/main"))


def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]), int(f[12])


try:
    events_arg = "syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_read,syscalls:sys_enter_epoll_pwait,context-switches"
    st = subprocess.Popen(["perf", "stat", "-x,", "-e", events_arg, "-p", str(pid)], stderr=subprocess.PIPE, text=True)
    argv = [os.path.join(BUILD, "bin/fanoutload"), "-system", load, "-addr", f"127.0.0.1:{port}", "-subs", str(subs),
            "-conns", str(subs // per), "-events", str(events), "-spacing-ms", str(spacing), "-server-pid", str(pid), "-label", "count"]
    u0, s0 = cpu(pid)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=900).stdout
    u1, s1 = cpu(pid)
    st.send_signal(2)
    err = st.communicate()[1]
    r = json.loads(out.strip().splitlines()[-1])
    n = r["delivered"]
    tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
    for line in err.strip().splitlines():
        f = line.split(",")
        if len(f) > 2 and f[0].strip().isdigit():
            print(f"{f[2]}: {int(f[0]) / n:.3f} per delivery")
    print(f"user {(u1 - u0) * tick_us / n:.2f} us, system {(s1 - s0) * tick_us / n:.2f} us per delivery (whole run)")
    print({k: r[k] for k in ("server_cpu_us_per_delivery", "deliveries_per_s", "p50_us")})
finally:
    stop()
