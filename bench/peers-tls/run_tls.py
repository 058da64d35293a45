#!/usr/bin/env python3
"""Invoke over TLS: the gateway terminating TLS itself (--tls-cert/--tls-key on both ports) against
grpc-gateway 1.6's generated REST->gRPC proxy serving HTTPS itself (net/http ServeTLS), same Go inventory backend
(cleartext behind both), same Go load client, paths interleaved in blocks as in the peers harness.

  python3 bench/peers-tls/run_tls.py [--gw /tmp/perf/new] [--reps 10] [--quick] [--with-cleartext] [--gw-tls flags|off] [--out DIR] [--tag NAME]
  python3 bench/peers-tls/run_tls.py --summarize DIR/TAG.jsonl

Per repetition: a CA and a server certificate for IP 127.0.0.1 made with the `openssl` CLI (ECDSA P-256, once per
run), then fresh processes: the Go backend (cleartext), the gateway (`node GW/dist/src/main/cli.js --tls-cert
--tls-key`), grpcgwproxy -tls-cert/-tls-key; then the TLS invokeload (bench/peers-tls/invokeload) at c=1 and c=64
(the order alternates per repetition) on four paths, interleaved in blocks within each run:

  direct  gRPC PutItem straight to the backend, cleartext (the baseline of "added latency")
  gwgrpc  the gateway's gRPC platform.Gateway/InvokeJson over TLS (ALPN h2)
  gwrest  the gateway's REST POST /v1/gateway/invoke-json over HTTPS (HTTP/1.1 keep-alive)
  grpcgw  grpc-gateway's REST POST /v1/items over HTTPS (HTTP/1.1 keep-alive)

Connections are made (and TLS handshakes done) during the warm-up, so the figures are the steady cost of TLS records,
not of handshakes. Printed: a markdown table per concurrency with c=1 added p50/p99 over the direct call, c=64 calls/s
and proxy CPU per call (utime+stime of the gateway or grpcgwproxy process over its blocks), each as median [min-max]
over repetitions and as the ratio gateway / grpc-gateway of the same repetition.

--with-cleartext adds a second gateway of the same build without TLS (paths gwgrpc2/gwrest2, cleartext) to the same
interleaved run: the gateway's own cost of TLS.

--gw-tls off starts the gateway in cleartext and dials its two paths without TLS (grpc-gateway stays on TLS): only for
checking the runner on a build without the TLS flags; its table says so.

Needs: ../shared/peers built (its README: Debian packages, ./build.sh, backend/build.sh), bench/peers-tls/build.sh run,
GW a checkout with `npm ci` and `npm run build` (bench/peers/prepare.sh REF DIR). Quiet-machine gate as
bench/peers/compare.py (bench/peers/peerslib.py): --gate-busy, --gate-load, --no-gate."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the repository or the harness
sys.path.insert(0, os.path.join(HERE, "../peers"))
from peerslib import BACKEND_BIN, TLS_BIN, Server, free_port, log, loadavg, run_json, start_gateway, wait_quiet  # noqa: E402

GW_PATHS = ("gwgrpc", "gwrest")
NAMES = {"direct": "direct gRPC to the backend (cleartext)", "gwgrpc": "gateway gRPC InvokeJson", "gwrest": "gateway REST invoke-json",
         "gwgrpc2": "gateway gRPC InvokeJson, cleartext (--with-cleartext)", "gwrest2": "gateway REST invoke-json, cleartext (--with-cleartext)",
         "grpcgw": "grpc-gateway 1.6 REST"}


def make_certs(d):
    """A CA and a server certificate for IP:127.0.0.1 signed by it (ECDSA P-256, 2 days), with the openssl CLI."""
    def ossl(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ossl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=peers-tls bench CA")
    ossl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    with open(os.path.join(d, "ext.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n")
    ossl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.pem",
         "-days", "2", "-extfile", "ext.cnf")
    return {k: os.path.join(d, f) for k, f in (("ca", "ca.pem"), ("cert", "server.pem"), ("key", "server.key"))}


def one_rep(a, certs, rep, out):
    tls_on = a.gw_tls == "flags"
    bport = free_port()
    procs = []
    try:
        backend = Server("backend", [BACKEND_BIN, "-port", str(bport)], port=bport)
        procs.append(backend)
        gw = start_gateway(a.gw, bport, ["--tls-cert", certs["cert"], "--tls-key", certs["key"]] if tls_on else [])
        procs.append(gw)
        gw2 = None
        if a.with_cleartext:  # the same build without TLS: what TLS itself costs the gateway
            gw2 = start_gateway(a.gw, bport, name="gateway-cleartext")
            procs.append(gw2)
        grpcgw = Server("grpcgw-tls", [os.path.join(TLS_BIN, "grpcgwproxy"), "-backend", f"127.0.0.1:{bport}", "-tls-cert", certs["cert"],
                                       "-tls-key", certs["key"]], regex=r'"port":(\d+)')
        procs.append(grpcgw)
        tls_paths = (list(GW_PATHS) if tls_on else []) + ["grpcgw"]
        concs = [1, 64] if rep % 2 == 0 else [64, 1]
        for conc in concs:
            if conc == 1:
                calls, rounds, warm = (100, 2, 50) if a.quick else (300, 4, 200)
            else:
                calls, rounds, warm = (1000, 2, 200) if a.quick else (3000, 3, 500)
            argv = [os.path.join(TLS_BIN, "invokeload"), "-conc", str(conc), "-calls", str(calls), "-rounds", str(rounds), "-warm", str(warm),
                    "-pid-backend", str(backend.pid), "-pid-gw", str(gw.pid), "-pid-grpcgw", str(grpcgw.pid),
                    "-direct", f"127.0.0.1:{bport}", "-gwgrpc", f"127.0.0.1:{gw.port}", "-gwrest", f"127.0.0.1:{gw.http_port}",
                    "-grpcgw", f"127.0.0.1:{grpcgw.port}", "-ca", certs["ca"], "-tls", ",".join(tls_paths)]
            if gw2:
                argv += ["-pid-gw2", str(gw2.pid), "-gwgrpc2", f"127.0.0.1:{gw2.port}", "-gwrest2", f"127.0.0.1:{gw2.http_port}"]
            la0 = loadavg()
            r = run_json(argv, timeout=900)
            r.update({"tag": a.tag, "rep": rep, "gw": a.gw, "gw_tls": a.gw_tls, "loadavg_start": la0, "time": time.strftime("%Y-%m-%dT%H:%M:%S")})
            with open(out, "a") as f:
                f.write(json.dumps(r) + "\n")
            for name, p in r["paths"].items():
                log(f"rep {rep} c={conc:3d} {name:7s} {'tls' if p.get('tls') else 'tcp'}: p50 {p['p50_us']:7.0f} us p99 {p['p99_us']:7.0f} us "
                    f"{p['rps']:7.0f}/s proxy {p['proxy_cpu_us_per_call']:6.1f} us/call {p.get('http_proto', '')} errors {p['errors']} "
                    f"{p['first_error'][:120]}")
    finally:
        for p in reversed(procs):
            p.stop()


def fmt(xs, nd=0):
    xs = [x for x in xs if x == x]
    return f"{statistics.median(xs):,.{nd}f} [{min(xs):,.{nd}f}-{max(xs):,.{nd}f}]" if xs else "n/a"


def summarize(path):
    with open(path) as f:
        rows = [json.loads(l) for l in f if l.strip()]
    out = []
    for conc in (1, 64):
        rs = [r for r in rows if r["conc"] == conc]
        if not rs:
            continue
        modes = sorted({r.get("gw_tls", "flags") for r in rs})
        protos = sorted({f"{n} {p['http_proto']}" for r in rs for n, p in r["paths"].items() if p.get("http_proto")})
        errs = sum(p["errors"] for r in rs for p in r["paths"].values())
        out += [f"### Invoke over TLS, c={conc}: PutItem ~1 KB JSON, {len(rs)} repetitions, {rs[0]['rounds']} x {rs[0]['calls_per_block']} "
                f"calls per path per repetition" + ("" if modes == ["flags"] else f" (gateway TLS: {', '.join(modes)}: NOT TLS)"), "",
                f"REST protocols seen: {'; '.join(protos) or 'n/a'}. Errors: {errs}.", ""]
        if conc == 1:
            out += ["| path | TLS | p50 us | added p50 us | ratio to grpc-gateway | p99 us | added p99 us | ratio to grpc-gateway | proxy CPU us/call |",
                    "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        else:
            out += ["| path | TLS | calls/s | ratio to grpc-gateway | proxy CPU us/call | ratio to grpc-gateway | p50 us | p99 us | Go client CPU us/call |",
                    "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for name in ("direct", "gwgrpc", "gwrest", "gwgrpc2", "gwrest2", "grpcgw"):
            v = {k: [] for k in ("p50", "p99", "a50", "a99", "r50", "r99", "rps", "rrps", "cpu", "rcpu", "client")}
            tls = set()
            for r in rs:
                p, d, g = r["paths"].get(name), r["paths"].get("direct"), r["paths"].get("grpcgw")
                if not p or not d or not g:
                    continue
                tls.add("yes" if p.get("tls") else "no")
                a50, a99 = p["p50_us"] - d["p50_us"], p["p99_us"] - d["p99_us"]
                g50, g99 = g["p50_us"] - d["p50_us"], g["p99_us"] - d["p99_us"]
                v["p50"].append(p["p50_us"])
                v["p99"].append(p["p99_us"])
                v["a50"].append(a50)
                v["a99"].append(a99)
                v["r50"].append(a50 / g50 if g50 > 0 else float("nan"))
                v["r99"].append(a99 / g99 if g99 > 0 else float("nan"))
                v["rps"].append(p["rps"])
                v["rrps"].append(p["rps"] / g["rps"])
                v["cpu"].append(p["proxy_cpu_us_per_call"])
                v["rcpu"].append(p["proxy_cpu_us_per_call"] / g["proxy_cpu_us_per_call"] if g["proxy_cpu_us_per_call"] else float("nan"))
                v["client"].append(p["client_cpu_us_per_call"])
            if not v["p50"]:
                continue
            direct = name == "direct"
            dash = "-"
            if conc == 1:
                out.append(f"| {NAMES[name]} | {'/'.join(sorted(tls))} | {fmt(v['p50'])} | {dash if direct else fmt(v['a50'])} | "
                           f"{dash if direct else fmt(v['r50'], 2)} | {fmt(v['p99'])} | {dash if direct else fmt(v['a99'])} | "
                           f"{dash if direct else fmt(v['r99'], 2)} | {dash if direct else fmt(v['cpu'])} |")
            else:
                out.append(f"| {NAMES[name]} | {'/'.join(sorted(tls))} | {fmt(v['rps'])} | {fmt(v['rrps'], 2)} | {dash if direct else fmt(v['cpu'])} | "
                           f"{dash if direct else fmt(v['rcpu'], 2)} | {fmt(v['p50'])} | {fmt(v['p99'])} | {fmt(v['client'])} |")
        out.append("")
    out.append("Ratios are per repetition (same processes, interleaved blocks), then median [min-max]. Added latency is over the "
               "cleartext direct call of the same run. Proxy CPU is the gateway's or grpcgwproxy's utime+stime over its "
               "blocks / calls (10 ms ticks).")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gw", default="/tmp/perf/new", help="gateway checkout with dist/ built")
    ap.add_argument("--gw-tls", choices=("flags", "off"), default="flags", help="off: gateway in cleartext (runner check only)")
    ap.add_argument("--with-cleartext", action="store_true", help="also a second gateway (same build) in cleartext: paths gwgrpc2/gwrest2")
    ap.add_argument("--reps", type=int, default=10, help="one repetition takes about 15 s")
    ap.add_argument("--quick", action="store_true", help="short counts (smoke test; figures are noisy)")
    ap.add_argument("--gate-busy", type=float, default=0.15)
    ap.add_argument("--gate-load", type=float, default=None)
    ap.add_argument("--gate-max-min", type=float, default=90)
    ap.add_argument("--no-gate", action="store_true", help="skip the quiet-machine gate (smoke tests only)")
    ap.add_argument("--out", default="/tmp/perf/tls", help="not $PERF_OUT: env.sh points that into the harness")
    ap.add_argument("--tag", default=time.strftime("tls-%Y%m%dT%H%M%S"))
    ap.add_argument("--summarize", metavar="FILE.jsonl")
    a = ap.parse_args()
    if a.summarize:
        print(summarize(a.summarize))
        return
    for f in (os.path.join(a.gw, "dist/src/main/cli.js"), os.path.join(TLS_BIN, "invokeload"), os.path.join(TLS_BIN, "grpcgwproxy"), BACKEND_BIN):
        if not os.path.exists(f):
            raise SystemExit(f"missing {f} (see --help: prepare.sh, bench/peers-tls/build.sh, ../shared/peers/backend/build.sh)")
    if not shutil.which("openssl"):
        raise SystemExit("the openssl CLI is needed to make the certificates")
    os.makedirs(a.out, exist_ok=True)
    out = os.path.join(a.out, a.tag + ".jsonl")
    certdir = tempfile.mkdtemp(prefix="perf-tls-certs-")
    t0 = time.time()
    try:
        certs = make_certs(certdir)
        for rep in range(a.reps):
            if not a.no_gate:
                busy, load, waited = wait_quiet(a.gate_busy, a.gate_load, a.gate_max_min)
                log(f"rep {rep}: busy {busy:.2f}, load {load:.2f} after waiting {waited:.0f} s")
            one_rep(a, certs, rep, out)
    finally:
        shutil.rmtree(certdir, ignore_errors=True)
    text = summarize(out) + f"\n\nGateway {a.gw} (TLS: {a.gw_tls}), {a.reps} repetitions{' (--quick)' if a.quick else ''}, {time.time() - t0:.0f} s.\n"
    with open(os.path.join(a.out, a.tag + ".md"), "w") as f:
        f.write(text)
    print(text)
    log(f"results in {out}")


if __name__ == "__main__":
    main()
