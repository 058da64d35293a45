import sys, subprocess, collections, re
data, t = sys.argv[1], sys.argv[2]
ps = subprocess.run(["perf", "script", "-i", data, "-F", "pid,tid,ip,sym", "--time", t], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
incl = collections.Counter(); self_ = collections.Counter(); n = 0; nmain = 0
for block in ps.split("\n\n"):
    ls = [l.strip() for l in block.splitlines() if l.strip()]
    if not ls: continue
    n += 1
    pid, tid = ls[0].split()[0].split("/") if "/" in ls[0].split()[0] else (ls[0].split()[0], ls[0].split()[1])
    if pid != tid: continue
    nmain += 1
    syms = [l.split(None, 1)[1] if " " in l else l for l in ls[1:]]
    syms = [re.sub(r" \(/tmp/perf-\d+\.map\)| \(/usr/bin/node\)", "", s) for s in syms]
    seen = set()
    for s in syms:
        if s in seen: continue
        seen.add(s); incl[s] += 1
    self_[syms[0]] += 1
print("all", n, "main", nmain)
for s, v in incl.most_common(int(sys.argv[3]) if len(sys.argv) > 3 else 80):
    if "JS:" in s: print(f"{v:6d} {100*v/nmain:5.1f}% self {self_[s]:5d} {s[:130]}")
