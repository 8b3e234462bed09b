#!/bin/bash
# idle-proc.sh BIN TAG [NODES] [SETTLE_SECONDS]
#
# Starts a loopback testnet of NODES (default 40) `bedwe node` processes with
# BIN, lets it settle, then prints the CPU of all node processes over 30 s
# (utime+stime from /proc, % of one core), the median VmRSS and the median
# (min-max) number of established TCP connections per process, and stops the
# testnet. For idle comparisons (docs/benchmarks.md); run it on an
# otherwise quiet machine and alternate the binaries being compared.
set -euo pipefail
BIN=$1; TAG=$2; N=${3:-40}; SETTLE=${4:-90}
D=$(mktemp -d /tmp/idle-$TAG-XXXX)
"$BIN" testnet up --nodes "$N" --zones 4 --dir "$D" >"$D.up.log" 2>&1 || { echo "testnet up failed: $D.up.log"; exit 1; }
trap '"$BIN" testnet down --dir "$D" >/dev/null 2>&1' EXIT
sleep "$SETTLE"
pids=$(for f in "$D"/node-*/node.json; do python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$f"; done)
tick=$(getconf CLK_TCK)
cpu_ticks() { local t=0 s; for p in $pids; do s=$(awk '{print $14+$15}' "/proc/$p/stat" 2>/dev/null || echo 0); t=$((t + s)); done; echo "$t"; }
a=$(cpu_ticks); sleep 30; b=$(cpu_ticks)
cpu=$(echo "scale=1; ($b-$a)*100/$tick/30" | bc)
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)], "(" v[1] "-" v[NR] ")"}'; }
rss=$(for p in $pids; do awk '/^VmRSS/{printf "%.1f\n", $2/1024}' "/proc/$p/status"; done | median)
conns=$(for p in $pids; do ss -tnp state established 2>/dev/null | grep -c "pid=$p," || true; done | median)
echo "$TAG nodes=$N cpu=${cpu}% vmrss_mib=$rss connections=$conns load=$(cut -d' ' -f1-3 /proc/loadavg)"
