# perf record of a gateway (node --perf-prof) under the peers harness' fanoutload, gRPC Subscribe 100 per connection.
# Usage (env from ../shared/peers/env.sh, PERF_MAIN a built clone): python3 perfrec.py SUBS EVENTS SPACING_MS DELAY_S DURATION_S OUT.data
# then: perf inject --jit -i OUT.data -o OUT.inj.data (the jit-PID.dump is in PERF_MAIN); perf annotate -i OUT.inj.data -s SYMBOL
import os, subprocess, sys, time
sys.path.insert(0, "/work/shared/peers")
from perflib import BUILD, start_gateway
import run_fanout
subs = int(sys.argv[1]); events = int(sys.argv[2]); spacing = int(sys.argv[3]); delay = float(sys.argv[4]); dur = float(sys.argv[5]); out = sys.argv[6]
srv = start_gateway(run_fanout.GATEWAY_CONFIG, ["--perf-prof", "--no-write-protect-code-memory", "--interpreted-frames-native-stack"])
try:
    argv = [os.path.join(BUILD, "bin/fanoutload"), "-system", "grpc", "-addr", f"127.0.0.1:{srv.port}", "-subs", str(subs),
            "-conns", str(subs // 100), "-events", str(events), "-spacing-ms", str(spacing), "-server-pid", str(srv.pid), "-label", "perf"]
    c = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    subprocess.run(["perf", "record", "-k", "1", "-F", "2999", "-p", str(srv.pid), "-o", out, "--", "sleep", str(dur)], stderr=subprocess.DEVNULL)
    o, e = c.communicate(timeout=600)
    print(o.strip().splitlines()[-1][:600])
finally:
    srv.stop()
