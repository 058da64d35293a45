#!/usr/bin/env bash
# h2spec (the HTTP/2 conformance suite) against a started gateway's gRPC port, strict mode; fails unless every failing
# case is listed in test/h2spec-exceptions.txt (a case id and why, one a line). Run from .ci/run after `npm run build`.
#
#   scripts/h2spec.sh [h2spec args...]
#
# h2spec is built from its source at ${H2SPEC_SRC:-../shared/tools/h2spec} with that folder's build.sh (Debian's Go
# packages, see .ci/debian-packages); without the source the run is skipped, saying so (a clean clone has no
# ../shared). H2SPEC_BIN names a binary already built (it is reused, and built there when missing).
# H2SPEC_GATEWAY_ARGS adds gateway flags. A TLS run is the same script a second time:
#   H2SPEC_BIN=$bin H2SPEC_GATEWAY_ARGS="--tls-cert c.pem --tls-key k.pem" scripts/h2spec.sh -t -k
set -euo pipefail
cd "$(dirname "$0")/.."

# The source: H2SPEC_SRC, else ../shared/tools/h2spec beside the checkout, else the workplace's /work/shared copy.
src=${H2SPEC_SRC:-}
if [ -z "$src" ]; then
  for c in ../shared/tools/h2spec /work/shared/tools/h2spec; do
    if [ -x "$c/build.sh" ]; then src=$c; break; fi
  done
  src=${src:-../shared/tools/h2spec}
fi
label="h2spec${*:+ $*}"
work=$(mktemp -d)
gw=""
cleanup() {
  if [ -n "$gw" ]; then kill "$gw" 2>/dev/null || true; wait "$gw" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

bin=${H2SPEC_BIN:-$work/h2spec}
if [ ! -x "$bin" ]; then
  if [ ! -x "$src/build.sh" ]; then
    echo "ci: h2spec source not found at $src; skipped"
    exit 0
  fi
  "$src/build.sh" "$bin" >/dev/null
fi

# A built gateway (dist/), as .ci/run starts it for promtool; the port from its "gateway listening" line.
log=$work/gateway.log
# shellcheck disable=SC2086 # H2SPEC_GATEWAY_ARGS is a list of flags
node dist/src/main/cli.js --grpc-port 0 --http-port 0 ${H2SPEC_GATEWAY_ARGS:-} >"$log" 2>&1 &
gw=$!
for _ in $(seq 1 100); do grep -q '"gateway listening"' "$log" && break; sleep 0.1; done
port=$(node -e 'const l=require("fs").readFileSync(process.argv[1],"utf8").split("\n").find((x)=>x.includes("gateway listening"));if(!l)process.exit(1);console.log(JSON.parse(l).grpcPort)' "$log") \
  || { echo "ci: $label: the gateway did not start:"; cat "$log"; exit 1; }

# h2spec exits non-zero on any failure; the report decides, against the exceptions.
"$bin" -h 127.0.0.1 -p "$port" --strict -j "$work/report.xml" "$@" >"$work/out.txt" 2>&1 || true
if [ ! -s "$work/report.xml" ]; then
  echo "ci: $label wrote no report:"
  cat "$work/out.txt"
  exit 1
fi
tail -n 1 "$work/out.txt" | sed "s/^/ci: $label: /"

# Failing case ids (group/seq, as `h2spec http2/5.1/5` names them) not in the exceptions file.
node -e '
  const fs = require("fs");
  const xml = fs.readFileSync(process.argv[1], "utf8");
  const allowed = new Map();
  for (const line of fs.readFileSync(process.argv[2], "utf8").split("\n")) {
    const t = line.trim();
    if (t === "" || t.startsWith("#")) continue;
    const [id, ...why] = t.split(/\s+/);
    allowed.set(id, why.join(" "));
  }
  const failed = [];
  for (const suite of xml.split("<testsuite ").slice(1)) {
    const pkg = /package="([^"]*)"/.exec(suite)[1];
    let seq = 0;
    for (const tc of suite.split("<testcase ").slice(1)) {
      seq++;
      if (/<failure|<error/.test(tc)) failed.push(`${pkg}/${seq}: ${/classname="([^"]*)"/.exec(tc)[1]}`);
    }
  }
  const unexpected = failed.filter((f) => !allowed.has(f.slice(0, f.indexOf(":"))));
  for (const f of failed) console.log(`  ${allowed.has(f.slice(0, f.indexOf(":"))) ? "allowed" : "FAILED "} ${f}`);
  process.exit(unexpected.length > 0 ? 1 : 0);
' "$work/report.xml" test/h2spec-exceptions.txt || {
  echo "ci: $label: cases failed that test/h2spec-exceptions.txt does not list; h2spec said:"
  sed -n '/^Failures:/,$p' "$work/out.txt"
  exit 1
}
echo "ci: $label: OK"
