"""The quiet-machine gate of bench/peers/compare.py and bench/peers-tls/run_tls.py.

The peers harness waits for a 1-minute load average below 0.7. Between our own alternating jobs that average still
holds our previous job for about a minute, so gating every job on it adds one to two minutes of waiting per job and
says nothing about the others on the machine. Instead, before a job (when none of our processes run) the whole machine's
busy share is sampled from /proc/stat over 5 s: that is what other work costs right then. The harness's load-average
condition can be added (`load_limit`)."""
import sys
import time


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
