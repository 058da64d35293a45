"""Shared by the scripts of bench/peers and bench/peers-tls/run_tls.py: the quiet-machine gate, the peers harness's
perflib (imported from PEERS), and starting a gateway from a given checkout with extra flags (the harness's
start_gateway always uses $PERF_MAIN and fixed flags).

The peers harness waits for a 1-minute load average below 0.7. Between our own alternating jobs that average still
holds our previous job for about a minute, so gating every job on it adds one to two minutes of waiting per job and
says nothing about the others on the machine. Instead, before a job (when none of our processes run) the whole machine's
busy share is sampled from /proc/stat over 5 s: that is what other work costs right then. The harness's load-average
condition can be added (`load_limit`)."""
import contextlib
import os
import re
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the repository or the harness
HERE = os.path.dirname(os.path.abspath(__file__))
# The harness lives beside the repository (../shared/peers); a worktree elsewhere sets PEERS_DIR.
PEERS = os.environ.get("PEERS_DIR") or next((d for d in (os.path.normpath(os.path.join(HERE, "../../../shared/peers")), "/work/shared/peers")
                                             if os.path.exists(os.path.join(d, "perflib.py"))), "../shared/peers")
sys.path.insert(0, PEERS)
from perflib import Server, free_port, run_json  # noqa: E402,F401  (children started there are stopped by their pid)

BUILD = os.environ.get("PERF_BUILD", "/tmp/perf/build")
TLS_BIN = os.environ.get("PERF_TLS_BIN", os.path.join(BUILD, "tls-bin"))
BACKEND_BIN = os.environ.get("BACKEND_BIN", "/tmp/peers-backend/server")
NODE = os.environ.get("NODE", "node")


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def _cpu_times():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v), v[3] + v[4]  # all, idle + iowait


def busy_fraction(sample_s=5.0):
    """Share of all cores busy over sample_s seconds (0-1)."""
    t0, i0 = _cpu_times()
    time.sleep(sample_s)
    t1, i1 = _cpu_times()
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def wait_quiet(busy_limit=0.15, load_limit=None, max_min=90.0, poll_s=20):
    """Block (bounded by max_min) until the machine is less busy than busy_limit (and, if given, the 1-minute load
    average is below load_limit); returns (busy, load, waited_s)."""
    t0 = time.time()
    while True:
        busy, load = busy_fraction(), loadavg()
        if busy < busy_limit and (load_limit is None or load < load_limit):
            return busy, load, time.time() - t0
        if time.time() - t0 > max_min * 60:
            raise SystemExit(f"no quiet window in {max_min} min: busy {busy:.2f}, load {load:.2f}")
        log(f"machine busy {busy:.2f} (limit {busy_limit}), load {load:.2f}: waiting {poll_s} s")
        time.sleep(poll_s)


@contextlib.contextmanager
def environment(values):
    """This process's environment with `values` set, restored after (for a child the harness's own starter spawns)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def start_backend():
    """The harness's inventory backend ($BACKEND_BIN) on a free port; `.port` is it."""
    bport = free_port()
    return Server("backend", [BACKEND_BIN, "-port", str(bport)], port=bport)


def start_grpcgw(bport):
    """The harness's grpc-gateway (grpcgwproxy) in front of the backend on bport; `.port` is its HTTP port."""
    return Server("grpcgw", [os.path.join(BUILD, "bin/grpcgwproxy"), "-backend", f"127.0.0.1:{bport}"], regex=r'"port":(\d+)')


def start_gateway(gw_dir, bport, extra_args=(), name="gateway", env=None):
    """`node GW_DIR/dist/src/main/cli.js` (node itself, not npm, so the measured pid is the gateway) with the inventory
    backend on bport as its one service; returns the Server with .port (gRPC) and .http_port."""
    cfg = tempfile.NamedTemporaryFile("w", prefix="perf-gw-", suffix=".yaml", delete=False)
    cfg.write(f"services:\n  - name: inventory\n    grpc: {{host: 127.0.0.1, port: {bport}}}\n")
    cfg.close()
    argv = [NODE, os.path.join(gw_dir, "dist/src/main/cli.js"), "--grpc-port", "0", "--http-port", "0", "--config", cfg.name,
            "--log-level", "info", *extra_args]
    try:
        s = Server(name, argv, regex=r'"msg":"gateway listening"', cwd=gw_dir, env=env)
    except Exception:
        os.unlink(cfg.name)
        raise
    s.cfg = cfg.name  # Server.stop() removes it
    text = s.text()
    s.port = int(re.search(r'"grpcPort":(\d+)', text).group(1))
    s.http_port = int(re.search(r'"httpPort":(\d+)', text).group(1))
    if "did not load" in text or "slow JS fallback" in text:
        s.stop()
        raise RuntimeError(f"{name}: uWebSockets.js native binary did not load")
    return s
