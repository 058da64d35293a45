import sys,re,collections
path,t_kill=sys.argv[1],float(sys.argv[2])
steady=(t_kill-15,t_kill-1); fail=(t_kill-0.3,t_kill+1.3)
cnt={ 'steady':collections.Counter(),'fail':collections.Counter()}
def bucket(comm,stack):
    # stack: list of (sym,dso) leaf first
    sysc=None
    for sym,dso in stack:
        m=re.match(r'(__x64_sys_|__sys_|__do_sys_)(\w+)',sym)
        if m: sysc=m.group(2)
    leafsym,leafdso=stack[0]
    if sysc: return 'sys:'+sysc
    if 'kallsyms' in leafdso:
        for sym,dso in stack:
            if 'irq' in sym or 'softirq' in sym: return 'k:irq'
            if 'schedule' in sym: return 'k:sched'
        return 'k:other:'+leafsym
    if 'perf-' in leafdso or leafsym.startswith(('LazyCompile','JS:','Builtin:','Function:','Stub:','BytecodeHandler','InterpretedFunction','Script','RegExp')): return 'js'
    if 'uws' in leafdso: return 'uws'
    if 'node' in leafdso.split('/')[-1]: return 'node-native'
    if 'libc' in leafdso: return 'libc'
    return 'user:'+leafdso.split('/')[-1]
cur=None
def flush():
    if not cur: return
    comm,t,stack=cur
    if not stack: return
    w='steady' if steady[0]<=t<steady[1] else 'fail' if fail[0]<=t<fail[1] else None
    if not w: return
    c='node' if comm.startswith('node') else comm
    cnt[w][(c,bucket(comm,stack))]+=1
for line in open(path):
    if not line.strip(): flush(); cur=None; continue
    if not line.startswith(('\t',' ')) or re.match(r'^\S',line):
        m=re.match(r'^(\S.*?)\s+(\d+)/(\d+)\s+([\d.]+):',line)
        if m: cur=(m.group(1),float(m.group(4)),[]); continue
    parts=line.strip().split(' ',1)
    if cur is not None and len(parts)==2:
        rest=parts[1]; m=re.match(r'(.*) \((.*)\)$',rest)
        if m: cur[2].append((m.group(1),m.group(2)))
flush()
ds=steady[1]-steady[0]; df=fail[1]-fail[0]
keys=set(cnt['steady'])|set(cnt['fail'])
rows=[(k,cnt['steady'][k]/ds,cnt['fail'][k]/df) for k in keys]
rows.sort(key=lambda r:-(r[2]-r[1]))
print('samples/s (499 Hz per CPU => 499 = one core)')
for k,s,f in rows[:40]: print(f"{k[0]:12} {k[1]:40} steady {s:7.1f} fail {f:7.1f} extra {f-s:7.1f}")
tot=collections.defaultdict(lambda:[0,0])
for k,s,f in rows: tot[k[0]][0]+=s; tot[k[0]][1]+=f
print({k:(round(v[0]),round(v[1])) for k,v in tot.items()})
