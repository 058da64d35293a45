#!/usr/bin/env bash
# A Go gRPC client against the gateway's gRPC port over mutual TLS (grpc-go from Debian: golang-go
# golang-google-grpc-dev; GOPATH mode, no network). Not part of `npm test` (it needs Go); .ci/run may call it.
# Certificates are made at run time (test/support/certs.ts); the gateway runs from source with tsx.
# Checks: the right client certificate calls OK; no client certificate fails the handshake.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
gw=""
cleanup() {
  if [ -n "$gw" ]; then kill "$gw" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/gopath/src/gotlsclient"
cp scripts/go-tls-client/main.go "$work/gopath/src/gotlsclient/"
(cd "$work/gopath/src/gotlsclient" && GOPATH="$work/gopath:/usr/share/gocode" GO111MODULE=off GOFLAGS= GOCACHE="$work/gocache" go build -o "$work/client" .)

node --import tsx --input-type=module -e '
  import { makeTestPki } from "./test/support/certs.ts";
  const p = makeTestPki();
  console.log(JSON.stringify(p.files));' >"$work/pki.json"
f() { node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))[process.argv[2]])' "$work/pki.json" "$1"; }

: >"$work/gw.log"
node --import tsx src/main/cli.ts --grpc-port 0 --http-port 0 --threads 1 --api-key go-key \
  --tls-cert "$(f serverCert)" --tls-key "$(f serverKey)" --tls-client-ca "$(f ca)" >"$work/gw.log" 2>&1 &
gw=$!
for _ in $(seq 1 150); do grep -q '"gateway listening"' "$work/gw.log" && break; sleep 0.1; done
port=$(node -e 'const l=require("fs").readFileSync(process.argv[1],"utf8").split("\n").find((x)=>x.includes("gateway listening"));if(!l)process.exit(1);console.log(JSON.parse(l).grpcPort)' "$work/gw.log") \
  || { echo "go-tls-check: gateway did not start:"; cat "$work/gw.log"; exit 1; }

"$work/client" -addr "127.0.0.1:$port" -ca "$(f ca)" -cert "$(f clientCert)" -key "$(f clientKey)" -api-key go-key -expect ok
"$work/client" -addr "127.0.0.1:$port" -ca "$(f ca)" -api-key go-key -expect fail
echo "go-tls-check: ok"
