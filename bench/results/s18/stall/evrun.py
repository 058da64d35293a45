# One fan-out run with the per-event client (fanoutload with fanoutload-per-event.patch, built as FANOUTDBG): 10,000
# subscribers on their own connections, 40 events 200 ms apart. Prints p50/p99, every event with deliveries over
# 250 ms, and every publish answered after 150 ms or sent more than 20 ms late.
#   python3 evrun.py 'BUILD[|KEEP_LOG=/tmp/gw.log]'      (environment from ../shared/peers/env.sh)
import json, os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../peers"))
from fanout_rate import start_server  # noqa: E402

pid, port, load, stop = start_server("gateway", sys.argv[1])
try:
    p = subprocess.run([os.environ.get("FANOUTDBG", "/tmp/s18/fanoutdbg"), "-system", "grpc", "-addr", f"127.0.0.1:{port}",
                        "-subs", "10000", "-conns", "10000", "-events", "40", "-spacing-ms", "200", "-warm", "5",
                        "-server-pid", str(pid)], capture_output=True, text=True, timeout=600)
    r = json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][-1])
    print(sys.argv[1][-25:], "p50", round(r["p50_us"]), "p99", round(r["p99_us"]))
    for l in p.stderr.splitlines():
        if l.startswith("EV") and "over250=0" not in l:
            print("  ", l)
        if l.startswith("PUB"):
            f = dict(x.split("=") for x in l.split()[2:])
            if float(f["ack"][:-2]) > 150 or float(f["late"][:-2]) > 20:
                print("  ", l)
finally:
    stop()
