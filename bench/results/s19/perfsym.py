import sys,re,collections
path,tk,comm_want=sys.argv[1],float(sys.argv[2]),sys.argv[3]
W=float(sys.argv[4]) if len(sys.argv)>4 else 5.0
steady=(tk-W,tk); fail=(tk,tk+W)
cnt={'s':collections.Counter(),'f':collections.Counter()}
cnt2={'s':collections.Counter(),'f':collections.Counter()}
cur=None
def flush():
    if not cur or not cur[3]: return
    comm,pid,t,stack=cur
    if not (str(pid) == comm_want or (comm_want.startswith("comm:") and comm.startswith(comm_want[5:]))): return
    w='s' if steady[0]<=t<steady[1] else 'f' if fail[0]<=t<fail[1] else None
    if not w: return
    sysc=None
    for sym,dso in stack:
        m=re.match(r'(__x64_sys_|__sys_|__do_sys_)(\w+)',sym)
        if m: sysc=m.group(2)
    leaf=stack[0]
    # first non-kernel frame (the user code that made the syscall or is running)
    user=next(((s,d) for s,d in stack if 'kallsyms' not in d),('?','?'))
    key=('sys:'+sysc) if sysc else ('k:'+leaf[0]) if 'kallsyms' in leaf[1] else leaf[1].split('/')[-1].split('.')[0][:12]+':'+leaf[0][:90]
    cnt[w][key]+=1
    cnt2[w][user[1].split('/')[-1][:14]+':'+user[0][:100]]+=1
for line in open(path):
    if not line.strip():
        flush(); cur=None; continue
    m=re.match(r'^(\S.*?)\s+(\d+)/(\d+)\s+([\d.]+):',line)
    if m: cur=(m.group(1),int(m.group(2)),float(m.group(4)),[]); continue
    if cur is not None:
        mm=re.match(r'\s*[0-9a-f]+ (.*) \((.*)\)$',line)
        if mm: cur[3].append((mm.group(1),mm.group(2)))
flush()
for c,title in ((cnt,'by leaf/syscall'),(cnt2,'by first user frame')):
    rows=sorted(set(c['s'])|set(c['f']), key=lambda k:-(c['f'][k]-c['s'][k]))
    tot_s=sum(c['s'].values()); tot_f=sum(c['f'].values())
    print(f'== {title}: steady {tot_s} samples, failover {tot_f} (extra {tot_f-tot_s}) in {W}s windows at 999 Hz')
    for k in rows[:int(sys.argv[5]) if len(sys.argv)>5 else 30]: print(f"{c['f'][k]-c['s'][k]:6d} {c['s'][k]:6d} {c['f'][k]:6d}  {k}")
