import sys, subprocess, collections
data, t = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None)
args = ["perf", "script", "-i", data, "-F", "comm,tid,time,ip,sym"] + (["--time", t] if t else [])
ps = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
cats = collections.Counter(); n = 0
rules = [
 ("compile", ["OptimizingCompileDispatcher", "PipelineCompilationJob", "Compiler::"]),
 ("gc", ["Heap::", "Scavenge", "MarkCompact", "ConcurrentMarking", "MinorMC", "GCTracer", "Sweeper"]),
 ("deliver", ["JS:*deliver ", "JS:^deliver ", "JS:~deliver "]),
 ("flushAll(writes)", ["flushAll"]),
 ("publish(read+handle)", ["onStreamRead"]),
 ("timers", ["processTimers", "listOnTimeout"]),
 ("immediate", ["processImmediate"]),
 ("ticks/microtasks", ["processTicksAndRejections", "RunMicrotasks"]),
 ("epoll", ["epoll_wait", "uv__io_poll"]),
]
for block in ps.split("\n\n"):
    lines = [l for l in block.splitlines() if l.strip()]
    if not lines: continue
    n += 1
    st = "\n".join(lines[1:])
    for name, keys in rules:
        if any(k in st for k in keys):
            cats[name] += 1; break
    else:
        cats["other"] += 1
for k, v in cats.most_common(): print(f"{v:6d} {100*v/n:5.1f}% {k}")
print(n)
