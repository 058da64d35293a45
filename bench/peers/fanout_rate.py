#!/usr/bin/env python3
"""Fan-out at a chosen publish rate: the peers harness' fanoutload against built gateways (and nats-server), alternated.

run_fanout.py publishes every 5 ms, more than any of the systems delivers at 1,000 or 10,000 subscribers on their own
connections, so its latency figures are those of a saturated box and depend on how each system holds its publisher
back. This runs the same client at a spacing of your choice (e.g. a rate every build keeps up with), so delivery
latency can be compared at equal throughput.

  python3 bench/peers/fanout_rate.py --builds /tmp/perf/base,/tmp/perf/new [--nats] --subs 1000 --per 1 \\
      --events 400 --spacing-ms 10 --reps 3 [--out FILE]

Environment as in ../shared/peers/env.sh (PERF_BUILD for the Go clients). One JSON line per run on stdout and in --out.
"""
import argparse, json, os, shutil, socket, subprocess, sys, time

sys.path.insert(0, os.environ.get("PEERS_DIR", "/work/shared/peers"))
import perflib  # noqa: E402
import run_fanout  # noqa: E402

KEYS = ("server_syscalls_out", "server_syscalls_in", "server_bytes_out", "server_cpu_us_per_delivery", "deliveries_per_s", "p50_us", "p99_us", "publish_ack_p50_us", "client_cpu_us_per_delivery",
        "server_rss_idle_bytes_per_sub")


def start_server(system, build):
    """nats-server, or the gateway of a built checkout (BUILD or BUILD|NAME=VALUE[|...]: environment for it alone;
    NODE_ARGS=a b gives node arguments instead, space-separated as builds are comma-separated, and KEEP_LOG=PATH copies the gateway's output there when it stops).
    Returns (pid, port, fanoutload's -system, stop)."""
    if system == "nats":
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        proc = subprocess.Popen(["nats-server", "-a", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        return proc.pid, port, "nats", proc.kill
    path, *env = build.split("|")
    env = dict(kv.split("=", 1) for kv in env)
    node_args = env.pop("NODE_ARGS", "").split()
    keep_log = env.pop("KEEP_LOG", None)
    perflib.MAIN = path
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        srv = perflib.start_gateway(run_fanout.GATEWAY_CONFIG, node_args)
    finally:
        os.environ.clear()
        os.environ.update(saved)

    def stop():
        if keep_log:
            shutil.copy(srv.logf.name, keep_log)
        srv.stop()
    return srv.pid, srv.port, "grpc", stop


def proc_io(pid):
    """The server's /proc/PID/io counters (write and read system calls, bytes), or None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/io") as f:
            return {k: int(v) for k, v in (line.split(": ") for line in f)}
    except OSError:
        return None


def run_one(system, build, a):
    pid, port, load, stop = start_server(system, build)
    try:
        argv = [os.path.join(perflib.BUILD, "bin/fanoutload"), "-system", load, "-addr", f"127.0.0.1:{port}",
                "-subs", str(a.subs), "-conns", str(max(1, a.subs // a.per)), "-events", str(a.events),
                "-spacing-ms", str(a.spacing_ms), "-warm", str(a.warm), "-server-pid", str(pid), "-label", "rate",
                "-size", str(a.size)] + (["-grpc-static-window"] if a.static_window else [])
        before = proc_io(pid)
        r = perflib.run_json(argv, timeout=900)
        after = proc_io(pid)
        if before and after:
            r["server_syscalls_out"] = after["syscw"] - before["syscw"]
            r["server_syscalls_in"] = after["syscr"] - before["syscr"]
            r["server_bytes_out"] = after["wchar"] - before["wchar"]
        return r
    finally:
        stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--builds", required=True, help="comma-separated built gateway checkouts, each BUILD[|NAME=VALUE...]")
    ap.add_argument("--nats", action="store_true", help="nats-server too")
    ap.add_argument("--subs", type=int, default=1000)
    ap.add_argument("--per", type=int, default=1, help="subscribers per connection")
    ap.add_argument("--events", type=int, default=400)
    ap.add_argument("--spacing-ms", type=float, default=10)
    ap.add_argument("--warm", type=int, default=20)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--size", type=int, default=256, help="event payload bytes (fanoutload -size)")
    ap.add_argument("--static-window", action="store_true", help="fanoutload -grpc-static-window: fixed 1 MiB windows, no BDP pings")
    ap.add_argument("--out")
    a = ap.parse_args()
    systems = [("gateway", b) for b in a.builds.split(",")] + ([("nats", "nats")] if a.nats else [])
    for rep in range(a.reps):
        order = systems if rep % 2 == 0 else list(reversed(systems))
        for system, build in order:
            r = run_one(system, build, a)
            row = {"rep": rep, "system": system, "build": build, "subs": a.subs, "per": a.per, "spacing_ms": a.spacing_ms,
                   "events": a.events, **{k: r.get(k) for k in KEYS}, "loadavg": perflib.loadavg()}
            line = json.dumps(row)
            print(line, flush=True)
            if a.out:
                with open(a.out, "a") as f:
                    f.write(line + "\n")


if __name__ == "__main__":
    main()
