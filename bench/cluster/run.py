#!/usr/bin/env python3
"""Cluster benchmark: one redis-server, N gateway replicas (built dist/, `--sidecar redis`), WebSocket subscribers
spread over several Go client processes and over the replicas, one publisher at a fixed rate through the replicas'
REST publish, a share of the subscribers reconnecting every second; optionally one replica killed (SIGKILL) at mid-run.

Usage (from the repository root, after `npm run build`):

    python3 bench/cluster/run.py --subs 60000 --client-procs 4 --topics 200 --rate 350 --duration 60 --runs normal,kill

    # development against one embedded gateway (positions resume only on the same process there)
    python3 bench/cluster/run.py --runtime embedded --replicas 1 --subs 2000 --client-procs 2 --topics 20 --rate 100 \\
        --duration 15 --runs normal

Each run publishes and churns for --warmup seconds (default 10) before it measures: the latency histograms, CPU and
Redis counters start at the end of the warm-up (the whole-run p99 is kept as with_warmup_p99_ms), and the exactness
checks (lost, duplicated, out of order) cover the whole run. Client ticks report each second's p99 and maximum.

Writes raw JSON lines (every process's ticks and finals, the runner's samples) to
bench/results/cluster/<tag>-<run>.jsonl, one summary object per run to bench/results/cluster/runs.jsonl, and a markdown
table to bench/results/cluster/summary-<tag>.md. Every child is a process of this runner, stopped by its pid at the end,
on failure and on Ctrl-C; every wait is bounded; only 127.0.0.1.
"""
import argparse
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CLK_TCK = os.sysconf("SC_CLK_TCK")

children = []  # every Popen this runner started


def log(msg):
    print(f"[cluster {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cpu_s(pid):
    """utime+stime of pid in seconds, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    fields = s[s.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_bytes(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(cmd, **kw):
    p = subprocess.Popen(cmd, **kw)
    children.append(p)
    return p


def stop_all():
    """SIGTERM every child still running, then SIGKILL what is left after 5 s; each by its own pid."""
    for p in children:
        if p.poll() is None:
            try:
                p.terminate()
            except OSError:
                pass
    deadline = time.time() + 5
    for p in children:
        try:
            p.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)
    children.clear()


def on_signal(signum, _frame):
    log(f"signal {signum}: stopping children")
    stop_all()
    sys.exit(130)


LOCAL_PORTS_LO = 10000  # the load clients' own local ports start here and end below the ephemeral range


def redis_commands(port):
    """Calls per command so far (`INFO commandstats`), for commands per event between two samples."""
    out = subprocess.run(["redis-cli", "-p", str(port), "INFO", "commandstats"], capture_output=True, text=True, timeout=10).stdout
    calls = {}
    for line in out.splitlines():
        m = re.match(r"cmdstat_([^:]+):calls=(\d+)", line)
        if m:
            calls[m.group(1)] = int(m.group(2))
    return calls


def raise_nofile():
    """Children inherit the limit: raise the soft limit up to the hard one (20,000 here), never past it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def build_client(work):
    gp = os.path.join(work, "gopath")
    src = os.path.join(gp, "src", "clusterload")
    os.makedirs(src, exist_ok=True)
    with open(os.path.join(HERE, "clusterload", "main.go")) as f, open(os.path.join(src, "main.go"), "w") as g:
        g.write(f.read())
    env = dict(os.environ, GOPATH=f"{gp}:/usr/share/gocode", GO111MODULE="off", GOFLAGS="",
               GOCACHE=os.environ.get("GOCACHE", os.path.join(work, "gocache")))
    binary = os.path.join(work, "clusterload")
    subprocess.run(["go", "build", "-o", binary, "."], cwd=src, env=env, check=True, timeout=300)
    return binary


class RawLog:
    """The run's raw JSON lines, written whole by several threads (the children's readers, the CPU sampler)."""

    def __init__(self, path):
        self.f = open(path, "w")
        self.lock = threading.Lock()

    def write(self, line):
        with self.lock:
            self.f.write(line)

    def close(self):
        with self.lock:
            self.f.close()


class Lines:
    """Reads a child's stdout on a thread: every line goes to the raw log (tagged) and JSON objects to a list."""

    def __init__(self, proc, tag, raw):
        self.proc, self.tag, self.raw = proc, tag, raw
        self.objs = []
        self.cond = threading.Condition()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if self.raw is not None and obj.get("type") != "final":
                self.raw.write(json.dumps({"src": self.tag, **obj}) + "\n")
            with self.cond:
                self.objs.append(obj)
                self.cond.notify_all()

    def wait_for(self, pred, timeout):
        deadline = time.time() + timeout
        with self.cond:
            while True:
                for o in self.objs:
                    if pred(o):
                        return o
                left = deadline - time.time()
                if left <= 0 or self.proc.poll() is not None and not self.proc.stdout.readable():
                    return None
                self.cond.wait(min(left, 0.5))


def start_gateway(args, redis_url, idx, work):
    cmd = ["node", *args.node_args.split(), os.path.join(ROOT, "dist/src/main/cli.js"), "--grpc-port", "0", "--http-port", "0",
           "--threads", str(args.threads), "--conversion-workers", "1", "--log-level", "info",
           # 15,000 subscribers per replica is the default bound (3/4 of 20,000 files) and exactly this run's share: with
           # churn a replica may briefly hold more. 19,000 still keeps it under the file limit (results before the
           # bound existed were taken without one).
           "--web-max-connections", "19000"]
    if args.runtime == "redis":
        cmd += ["--sidecar", "redis", "--redis-url", redis_url]
    logf = open(os.path.join(work, f"gateway-{idx}.log"), "w")
    p = spawn(cmd, stdout=subprocess.PIPE, stderr=logf, text=True, cwd=ROOT)
    deadline = time.time() + 30
    while time.time() < deadline:
        line = p.stdout.readline()
        if not line:
            raise RuntimeError(f"gateway {idx} exited (log {logf.name})")
        logf.write(line)
        if '"gateway listening"' in line:
            o = json.loads(line)
            # keep draining its stdout into the log so the pipe never fills
            threading.Thread(target=lambda: [logf.write(x) for x in p.stdout], daemon=True).start()
            return p, o["httpPort"]
    raise RuntimeError(f"gateway {idx}: no 'gateway listening' within 30 s")


def hist_merge(hists):
    m = {}
    for h in hists:
        for i, c in h or []:  # an empty histogram comes as null
            m[i] = m.get(i, 0) + c
    return sorted(m.items())


def hist_q(h, q, bucket_us):
    h = h or []
    total = sum(c for _, c in h)
    if total == 0:
        return None
    want, acc = q * total, 0
    for i, c in h:
        acc += c
        if acc >= want:
            return (i + 1) * bucket_us / 1000.0  # upper edge of the bucket, ms
    return (h[-1][0] + 1) * bucket_us / 1000.0


def wait_for_quiet(args):
    """Waits (bounded by --wait-max) until the 1-minute load average is below --max-load: the box is shared."""
    deadline = time.time() + args.wait_max
    while True:
        load = float(open("/proc/loadavg").read().split()[0])
        if load < args.max_load or time.time() > deadline:
            return load
        time.sleep(5)


# Seconds of CPU samples before and after the kill that measure what a failover costs.
FAILOVER_S = 5.0


def listen_overflows():
    """The kernel's count of connections dropped for a full accept queue (TcpExt ListenOverflows; the whole box)."""
    try:
        with open("/proc/net/netstat") as f:
            lines = [l.split() for l in f]
        for names, values in zip(lines, lines[1:]):
            if names[0] == "TcpExt:" and values[0] == "TcpExt:" and "ListenOverflows" in names:
                return int(values[names.index("ListenOverflows")])
    except (OSError, ValueError, IndexError):
        pass
    return None


def one_run(args, name, kill, binary, work, out_dir, tag):
    load0 = wait_for_quiet(args)
    overflows0 = listen_overflows()
    log(f"{name}: load average {load0:.2f} at start")
    raw = RawLog(os.path.join(out_dir, f"{tag}-{name}.jsonl"))
    redis_p = None
    redis_url = None
    try:
        if args.runtime == "redis":
            rport = free_port()
            rdir = tempfile.mkdtemp(prefix="redis-", dir=work)
            redis_p = spawn(["redis-server", "--bind", "127.0.0.1", "--port", str(rport), "--save", "", "--appendonly", "no",
                             "--dir", rdir, "--maxclients", "1000", "--loglevel", "warning"],
                            stdout=open(os.path.join(work, "redis.log"), "w"), stderr=subprocess.STDOUT)
            redis_url = f"redis://127.0.0.1:{rport}"
            deadline = time.time() + 10
            while time.time() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", rport), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.1)
        gws = [start_gateway(args, redis_url, i, work) for i in range(args.replicas)]
        gw_pids = [p.pid for p, _ in gws]
        ws_addrs = ",".join(f"127.0.0.1:{port}" for _, port in gws)
        log(f"{name}: {args.replicas} replica(s) on {ws_addrs}" + (f", redis {redis_url}" if redis_url else ""))
        time.sleep(1)
        rss0 = {pid: rss_bytes(pid) for pid in gw_pids}

        per = [args.subs // args.client_procs + (1 if i < args.subs % args.client_procs else 0) for i in range(args.client_procs)]
        client_env = dict(os.environ, GOMAXPROCS=str(args.client_gomaxprocs)) if args.client_gomaxprocs else None
        clients, first = [], 0
        # Each client process binds its connections from its own slice of the ports below the ephemeral range (see
        # portPool in clusterload/main.go); the kernel's port search stays for what the slices do not cover.
        eph_lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
        span = (eph_lo - LOCAL_PORTS_LO) // args.client_procs
        for i, n in enumerate(per):
            p = spawn([binary, "-mode", "sub", "-ports", f"{LOCAL_PORTS_LO + i * span}-{LOCAL_PORTS_LO + (i + 1) * span - 1}", "-ws-addrs", ws_addrs, "-subs", str(n), "-first", str(first), "-topics",
                       str(args.topics), "-churn", str(args.churn), "-dial-par", str(args.dial_par), "-drain-timeout-s",
                       str(args.drain), "-loops", str(args.client_loops), "-poll", args.client_poll,
                       "-failover-jitter", f"{args.failover_jitter}s"] + ([] if args.resume else ["-resume=false"]) + (["-url-subscribe"] if args.subscribe == "url" else [])
                      + (["-cpuprofile", os.path.join(args.client_cpuprofile, f"{name}-client-{i}.pprof")] if args.client_cpuprofile else []), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(os.path.join(work, f"client-{i}.log"), "w"),
                      text=True, env=client_env)
            clients.append(Lines(p, f"sub{i}", raw))
            first += n
        t_setup = time.time()
        for i, c in enumerate(clients):
            r = c.wait_for(lambda o: o.get("type") == "ready", args.setup_timeout)
            if r is None or r.get("failed"):
                raise RuntimeError(f"client {i} not ready: {r} (log {work}/client-{i}.log)")
        setup_s = time.time() - t_setup
        log(f"{name}: {args.subs} subscribers ready in {setup_s:.1f} s")
        time.sleep(2)
        rss1 = {pid: rss_bytes(pid) for pid in gw_pids}

        # CPU samples every second (a killed replica keeps its last sample)
        pids = {"redis": [redis_p.pid] if redis_p else [], "gateways": gw_pids, "clients": [c.proc.pid for c in clients]}
        last_cpu = {}
        sampling = threading.Event()

        def sample():
            for pid in [x for v in pids.values() for x in v]:
                v = cpu_s(pid)
                if v is not None:
                    last_cpu[pid] = v

        def sampler():
            while not sampling.wait(1.0):
                sample()
                raw.write(json.dumps({"src": "runner", "type": "cpu", "t": int(time.time() * 1000), "cpu_s": {str(k): v for k, v in last_cpu.items()},
                                      "rss": {str(pid): rss_bytes(pid) for pid in gw_pids}}) + "\n")

        sample()
        cpu0 = dict(last_cpu)
        cmds0 = redis_commands(rport) if redis_p else {}
        threading.Thread(target=sampler, daemon=True).start()

        final_path = os.path.join(work, f"pub-final-{name}.json")
        victim = args.replicas - 1 if kill else None
        pub_addrs = ",".join(f"127.0.0.1:{port}" for i, (_, port) in enumerate(gws) if i != victim)
        for c in clients:
            c.proc.stdin.write("start\n")
            c.proc.stdin.flush()
        pub = spawn([binary, "-mode", "pub", "-http-addrs", pub_addrs, "-topics", str(args.topics), "-rate", str(args.rate),
                     "-duration-s", str(args.warmup + args.duration), "-size", str(args.size), "-out", final_path],
                    stdout=subprocess.PIPE, stderr=open(os.path.join(work, "pub.log"), "w"), text=True)
        pids["clients"].append(pub.pid)
        publ = Lines(pub, "pub", raw)
        t_pub = time.time()
        # The warm-up: publishing and churn at full rate while the replicas' code is compiled and their heaps grow;
        # then the clients start their latency histograms afresh and the CPU and Redis counters are read again. The
        # sequence checks (lost, duplicated, out of order) cover the whole run.
        delivered_w = 0
        if args.warmup > 0:
            time.sleep(args.warmup)
            for c in clients:
                c.proc.stdin.write("measure\n")
                c.proc.stdin.flush()
            for i, c in enumerate(clients):
                m = c.wait_for(lambda o: o.get("type") == "measuring", 30)
                if m is None:
                    raise RuntimeError(f"client {i} did not start measuring")
                delivered_w += m["delivered"]
            sample()
            cpu0 = dict(last_cpu)
            cmds0 = redis_commands(rport) if redis_p else {}
        t_measure = time.time()
        killed_at = None
        failover = None
        if kill:
            # CPU over the FAILOVER_S before the kill and the FAILOVER_S after it: what the failover adds to the steady
            # rate, on the survivors and in the load clients (failover_*_cpu_us_per_reconnect in the summary).
            # (no measurement in a run too short for a window of a second on each side)
            window = min(FAILOVER_S, args.duration / 2 - 1)
            time.sleep(args.duration / 2 - max(window, 0))
            if window >= 1:
                sample()
                before = (time.time(), dict(last_cpu))
                time.sleep(window)
                sample()
                at = (time.time(), dict(last_cpu))
            gws[victim][0].send_signal(signal.SIGKILL)
            killed_at = time.time() - t_pub
            log(f"{name}: SIGKILL replica {victim} (pid {gw_pids[victim]}) at {killed_at:.1f} s")
            if window >= 1:
                time.sleep(window)
                sample()
                failover = (before, at, (time.time(), dict(last_cpu)))
        pf = publ.wait_for(lambda o: o.get("type") == "final", args.warmup + args.duration + 60)
        if pf is None:
            raise RuntimeError("publisher gave no final result")
        sample()
        cpu1 = dict(last_cpu)
        measured_s = time.time() - t_measure
        cmds1 = redis_commands(rport) if redis_p else {}
        log(f"{name}: published {pf['published']} events ({pf['failures']} failed) in {pf['elapsed_s']:.1f} s")
        for c in clients:
            c.proc.stdin.write(f"stop {final_path}\n")
            c.proc.stdin.flush()
        finals = []
        for i, c in enumerate(clients):
            f = c.wait_for(lambda o: o.get("type") == "final", args.drain + 30)
            if f is None:
                raise RuntimeError(f"client {i} gave no final result")
            finals.append(f)
        sample()
        cpu2 = dict(last_cpu)
        sampling.set()

        bucket = finals[0]["hist_bucket_us"]
        live = hist_merge(f["live_hist"] for f in finals)
        rep = hist_merge(f["replay_hist"] for f in finals)
        resub = hist_merge(f.get("resubscribe_hist", []) for f in finals)
        allh = hist_merge([live, rep])
        whole = hist_merge([allh] + [f.get("warmup_live_hist", []) for f in finals] + [f.get("warmup_replay_hist", []) for f in finals])
        s = lambda k: sum(f[k] for f in finals)  # noqa: E731
        delivered = s("delivered")
        measured = delivered - delivered_w  # deliveries after the warm-up (with the drain's, which the CPU window lacks)

        def dcpu(group, a, b):
            return sum(b.get(pid, 0) - a.get(pid, 0) for pid in pids[group])

        def failover_us(group):
            """CPU the failover added to `group`, per failed-over subscriber, us: the group's CPU in the seconds after
            the kill less its steady rate before. The gateways' steady rate includes the victim's (the survivors take
            over its deliveries; a killed replica keeps its last sample, so it adds nothing after)."""
            if failover is None or s("failure_reconnects") == 0:
                return None
            (t0, c0), (t1, c1), (t2, c2) = failover
            steady = sum(c1.get(p, 0) - c0.get(p, 0) for p in pids[group]) / (t1 - t0)
            extra = sum(c2.get(p, 0) - c1.get(p, 0) for p in pids[group]) - steady * (t2 - t1)
            return extra * 1e6 / s("failure_reconnects")

        published = pf["published"]
        published_m = published * measured_s / max(pf["elapsed_s"], 1e-9)  # the measured window's share (a fixed rate)
        summary = {
            "tag": tag, "run": name, "runtime": args.runtime, "replicas": args.replicas, "threads": args.threads,
            "client_loops": args.client_loops, "client_poll": args.client_poll, "client_gomaxprocs": args.client_gomaxprocs,
            "failover_jitter_s": args.failover_jitter,
            "subscribe": args.subscribe,
            "subs": args.subs, "client_procs": args.client_procs, "topics": args.topics, "rate_events_s": args.rate,
            "duration_s": args.duration, "warmup_s": args.warmup, "churn_per_s": args.churn, "payload_pad_bytes": args.size,
            "killed_replica_at_s": killed_at, "setup_s": round(setup_s, 1),
            "published": published, "publish_failures": pf["failures"], "publish_retries": pf["retries"],
            "publish_elapsed_s": pf["elapsed_s"], "publish_ack_p50_ms": hist_q(pf["ack_hist"], 0.5, bucket),
            "publish_ack_p99_ms": hist_q(pf["ack_hist"], 0.99, bucket),
            "expected": s("expected"), "delivered": delivered, "replayed": s("replayed"),
            "deliveries_per_s": measured / measured_s,
            "offered_deliveries_per_s": args.rate * args.subs / args.topics,
            "p50_ms": hist_q(allh, 0.5, bucket), "p99_ms": hist_q(allh, 0.99, bucket), "p999_ms": hist_q(allh, 0.999, bucket),
            "with_warmup_p50_ms": hist_q(whole, 0.5, bucket), "with_warmup_p99_ms": hist_q(whole, 0.99, bucket),
            "live_p50_ms": hist_q(live, 0.5, bucket), "live_p99_ms": hist_q(live, 0.99, bucket),
            "replay_p50_ms": hist_q(rep, 0.5, bucket), "replay_p99_ms": hist_q(rep, 0.99, bucket),
            "resubscribe_p50_ms": hist_q(resub, 0.5, bucket), "resubscribe_p99_ms": hist_q(resub, 0.99, bucket),
            "lost": s("lost"), "duplicated": s("duplicated"), "out_of_order": s("out_of_order"),
            "reconnects": s("reconnects"), "churn_reconnects": s("churn_reconnects"), "failure_reconnects": s("failure_reconnects"),
            "dial_failures": s("dial_failures"), "abandoned": s("abandoned"), "recovered_true": s("recovered_true"),
            "recovered_false": s("recovered_false"), "frame_errors": s("frame_errors"), "behind_at_end": s("behind_at_end"),
            "drain_s": max(f["drain_s"] for f in finals),
            "gateway_rss_before_mb": [round((rss0[p] or 0) / 2**20, 1) for p in gw_pids],
            "gateway_rss_after_setup_mb": [round((rss1[p] or 0) / 2**20, 1) for p in gw_pids],
            "rss_bytes_per_sub": sum((rss1[p] or 0) - (rss0[p] or 0) for p in gw_pids) / args.subs,
            "gateway_cpu_s": dcpu("gateways", cpu0, cpu1), "redis_cpu_s": dcpu("redis", cpu0, cpu1),
            "client_cpu_s": dcpu("clients", cpu0, cpu1),
            "gateway_cpu_us_per_delivery": dcpu("gateways", cpu0, cpu1) * 1e6 / max(measured, 1),
            "redis_cpu_us_per_event": dcpu("redis", cpu0, cpu1) * 1e6 / max(published_m, 1) if redis_p else None,
            "client_cpu_us_per_delivery": dcpu("clients", cpu0, cpu1) * 1e6 / max(measured, 1),
            "box_cpu_cores": (dcpu("gateways", cpu0, cpu1) + dcpu("redis", cpu0, cpu1) + dcpu("clients", cpu0, cpu1)) / measured_s,
            "redis_commands_per_event": {k: round((v - cmds0.get(k, 0)) / max(published_m, 1), 2)
                                         for k, v in sorted(cmds1.items()) if v > cmds0.get(k, 0)},
            "loadavg_start": load0, "loadavg_end": open("/proc/loadavg").read().strip(),
            # SYNs the kernel dropped for a full accept queue during the run (each costs its client a 1 s retransmit)
            "listen_overflows": None if overflows0 is None else listen_overflows() - overflows0,
            "failover_gateway_cpu_us_per_reconnect": failover_us("gateways"),
            "failover_client_cpu_us_per_reconnect": failover_us("clients"),
        }
        raw.write(json.dumps({"src": "runner", "type": "summary", **summary}) + "\n")
        for i, f in enumerate(finals):
            raw.write(json.dumps({"src": f"sub{i}", **{k: v for k, v in f.items() if not k.endswith("_hist")}}) + "\n")
        return summary
    finally:
        raw.close()
        stop_all()


def fmt(v, nd=1):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    return f"{v:,}"


def markdown(rows):
    h = ("| run | subs | replicas | topics | events/s | deliveries/s | p50 ms | p99 ms | live p99 ms | lost | dup | ooo | "
         "reconnects (failover) | recovered false | RSS B/sub | gateway CPU us/del | Redis CPU us/event | client CPU us/del | box cores | load at start |")
    lines = [h, "|" + "|".join(["---"] + ["---:"] * (h.count("|") - 2)) + "|"]
    for r in rows:
        lines.append("| " + " | ".join([
            r["run"], fmt(r["subs"]), str(r["replicas"]), str(r["topics"]), fmt(r["published"] / r["publish_elapsed_s"], 0),
            fmt(r["deliveries_per_s"], 0), fmt(r["p50_ms"]), fmt(r["p99_ms"]), fmt(r["live_p99_ms"]), fmt(r["lost"]),
            fmt(r["duplicated"]), fmt(r["out_of_order"]), f"{r['reconnects']:,} ({r['failure_reconnects']:,})",
            fmt(r["recovered_false"]), fmt(r["rss_bytes_per_sub"], 0), fmt(r["gateway_cpu_us_per_delivery"], 2),
            fmt(r["redis_cpu_us_per_event"], 1), fmt(r["client_cpu_us_per_delivery"], 2), fmt(r["box_cpu_cores"], 2), fmt(r.get("loadavg_start"))]) + " |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runtime", choices=["redis", "embedded"], default="redis")
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1, help="--threads of each replica (2 cores for the whole box)")
    ap.add_argument("--subs", type=int, default=60000)
    ap.add_argument("--client-procs", type=int, default=4)
    ap.add_argument("--topics", type=int, default=200)
    ap.add_argument("--rate", type=float, default=350, help="published events/s over all topics")
    ap.add_argument("--duration", type=float, default=60, help="publishing seconds measured, after the warm-up")
    ap.add_argument("--warmup", type=float, default=10, help="publishing (and churn) seconds before the measured ones: "
                    "latency and CPU figures leave them out, the exactness checks do not (0: measure from the first event)")
    ap.add_argument("--churn", type=float, default=0.01, help="share of subscribers reconnecting per second")
    ap.add_argument("--size", type=int, default=128, help="padding bytes in each event's data")
    # One loop and GOMAXPROCS 1 per client process: with four client processes beside four replicas on two cores, Go's
    # default (a P per core, spinning for work) cost the 1% churn run p50 507 ms / p99 5.4 s against 60 ms / 0.7 s
    # (bench/results/cluster/summary-2026-11-27-s8.md).
    ap.add_argument("--client-loops", type=int, default=1, help="epoll loops per client process")
    ap.add_argument("--client-cpuprofile", default="", help="a directory: each client process writes a Go CPU profile of its "
                    "measured part there (go tool pprof -top)")
    ap.add_argument("--client-poll", default="1ms", help="how often a client loop looks for ready sockets, sleeping in between "
                    "(a Go duration; 0: block in epoll_wait). Adds up to that much to each measured latency")
    ap.add_argument("--client-gomaxprocs", type=int, default=1, help="GOMAXPROCS of the client processes (0: Go's default)")
    ap.add_argument("--dial-par", type=int, default=32, help="parallel connection setups per client process")
    ap.add_argument("--drain", type=float, default=30, help="bound on the wait for the last events after publishing")
    ap.add_argument("--setup-timeout", type=float, default=300)
    ap.add_argument("--no-resume", dest="resume", action="store_false",
                    help="reconnect without since: checks the checker (the gaps must count as lost)")
    ap.add_argument("--max-load", type=float, default=1.0, help="start a run once the 1-min load average is below this")
    ap.add_argument("--wait-max", type=float, default=300, help="bound on that wait (seconds); the run starts anyway after it")
    ap.add_argument("--subscribe", choices=["url", "frame"], default="url", help="how subscribers subscribe (and resume): in the "
                    "WebSocket upgrade URL, as the client library does (default), or with a subscribe frame after the upgrade (one "
                    "round trip and one client write more per (re)connect; the runs before session 21)")
    ap.add_argument("--failover-jitter", type=float, default=0.0,
                    help="seconds: a subscriber whose replica died reconnects after a random delay below this, as clients "
                         "with a jittered backoff do (0: at once, every one of them in the same moment)")
    ap.add_argument("--runs", default="normal", help="comma-separated: normal, kill (kill needs the survivors within the file limit)")
    ap.add_argument("--tag", default=time.strftime("%Y-%m-%dT%H-%M"))
    ap.add_argument("--node-args", default="", help="node options for every replica, e.g. '--cpu-prof --cpu-prof-dir=/tmp/prof' "
                    "(a profile is written when the replica exits at the end of the run)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/cluster"))
    args = ap.parse_args()
    if args.runtime == "embedded" and args.replicas != 1:
        ap.error("--runtime embedded: positions resume only on the same process, use --replicas 1")
    if "kill" in args.runs and args.replicas < 2:
        ap.error("the kill run needs at least 2 replicas")
    per_proc = -(-args.subs // args.client_procs)
    soft, hard = raise_nofile()
    if per_proc + 100 > soft:
        ap.error(f"{per_proc} subscribers per client process exceed the file limit {soft}: raise --client-procs")
    # A replica past its file limit stops accepting (uWS logs nothing): the subscribers it cannot take never resume
    # and would count as lost. After the kill the survivors hold every subscriber, plus churn in flight.
    survivors = args.replicas - 1 if "kill" in args.runs else args.replicas
    per_replica = -(-args.subs // survivors)
    if per_replica * 1.02 + 300 > soft:
        need = -(-args.subs // int((soft - 300) / 1.02)) + (1 if "kill" in args.runs else 0)
        ap.error(f"{per_replica} subscribers per replica{' after the kill' if survivors < args.replicas else ''} exceed the "
                 f"file limit {soft}: use --replicas {need} or fewer --subs")
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="cluster-bench-")
    log(f"work dir {work}, file limit {soft}/{hard}")
    rows = []
    try:
        binary = build_client(work)
        for name in args.runs.split(","):
            r = one_run(args, name, name == "kill", binary, work, args.out, args.tag)
            rows.append(r)
            with open(os.path.join(args.out, "runs.jsonl"), "a") as f:
                f.write(json.dumps(r) + "\n")
            log(f"{name}: " + json.dumps({k: r[k] for k in ("deliveries_per_s", "p50_ms", "p99_ms", "lost", "duplicated", "out_of_order",
                                                            "recovered_false", "reconnects", "rss_bytes_per_sub", "redis_cpu_us_per_event",
                                                            "box_cpu_cores")}))
            time.sleep(3)
    finally:
        stop_all()
    if rows:
        md = markdown(rows)
        with open(os.path.join(args.out, f"summary-{args.tag}.md"), "w") as f:
            f.write(f"# Cluster benchmark {args.tag}\n\n`{' '.join(sys.argv)}`\n\n{md}")
        print(md)


if __name__ == "__main__":
    main()
