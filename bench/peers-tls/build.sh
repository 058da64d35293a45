#!/bin/bash
# Builds the TLS variants of the peers harness's invokeload and grpcgwproxy (bench/peers-tls/*/main.go) in GOPATH mode
# from Debian packages, reusing what ../shared/peers/build.sh left in $PERF_BUILD: the generated acme/inventory/v1
# package (messages, gRPC client, grpc-gateway .gw.go) in $PERF_BUILD/gopath and grpc-gateway's runtime unpacked under
# $PERF_BUILD/debroot. Run that build first (its README lists the Debian packages). Binaries go to
# $PERF_TLS_BIN (default $PERF_BUILD/tls-bin); nothing is written inside the repository.
#
#   bench/peers-tls/build.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PERF_BUILD=${PERF_BUILD:-/tmp/perf/build}
PERF_TLS_BIN=${PERF_TLS_BIN:-$PERF_BUILD/tls-bin}
gp="$PERF_BUILD/tls-gopath"
if [ ! -d "$PERF_BUILD/gopath/src/acme/inventory/v1" ] || [ ! -d "$PERF_BUILD/debroot/usr/share/gocode" ]; then
  echo "bench/peers-tls/build.sh: run ../shared/peers/build.sh first (no $PERF_BUILD/gopath or debroot)" >&2
  exit 1
fi
rm -rf "$gp" && mkdir -p "$PERF_TLS_BIN"
export GOPATH="$gp:$PERF_BUILD/gopath:$PERF_BUILD/debroot/usr/share/gocode:/usr/share/gocode" GO111MODULE=off GOFLAGS= \
  GOCACHE="${GOCACHE:-$PERF_BUILD/gocache}"
for p in invokeload grpcgwproxy; do
  mkdir -p "$gp/src/perftls/$p" && cp "$here/$p/main.go" "$gp/src/perftls/$p/"
  (cd "$gp/src/perftls/$p" && go build -o "$PERF_TLS_BIN/$p.new" . && mv -f "$PERF_TLS_BIN/$p.new" "$PERF_TLS_BIN/$p")
done
echo "$PERF_TLS_BIN"
