#!/bin/bash
# Makes a built checkout of the gateway for the peers harness (PERF_MAIN-style): a fresh clone of REPO at REF in DIR,
# `npm ci` (from the npm registry) and `npm run build`. An existing DIR is replaced.
#
#   bench/peers/prepare.sh REF DIR [REPO]     e.g. bench/peers/prepare.sh 4146008 /tmp/perf/base
#                                                 bench/peers/prepare.sh main /tmp/perf/new  (a branch: main, s6-tls)
# REPO defaults to this checkout's repository (a worktree's common git directory is cloned, so local branches exist).
set -euo pipefail
REF=$1 DIR=$2
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=${3:-$(cd "$HERE" && git rev-parse --path-format=absolute --git-common-dir)}
rm -rf "$DIR"
git clone -q "$REPO" "$DIR"
cd "$DIR"
# a branch of the cloned repository is origin/NAME in the clone
if git rev-parse -q --verify "origin/$REF^{commit}" >/dev/null; then REF="origin/$REF"; fi
git checkout -q --detach "$REF"
npm ci --no-audit --no-fund --loglevel=error
npm run build >/dev/null
echo "$DIR at $(git log --oneline -1)"
