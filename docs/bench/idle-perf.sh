#!/bin/bash
# idle-perf.sh BIN TAG [NODES] [SETTLE_SECONDS] [WINDOW_SECONDS] [testnet up flags...]
#
# Starts a loopback testnet of NODES (default 40) `bedwe node` processes with
# BIN, lets it settle, then measures the CPU of all node processes over
# WINDOW seconds (default 180: at 40 nodes that holds three presence
# refreshes) two ways at once: perf's task-clock (exact, needs perf) and
# utime+stime from /proc (what `bedwe bench --experiments idle` reads). It
# prints both as % of one core, the CPU per node in ms a second and the
# context switches per node a second, then stops the testnet. /proc reads
# 25-35 % more than task-clock on the same processes; compare runs measured
# the same way, back to back, on an otherwise quiet machine
# (docs/benchmarks.md).
set -euo pipefail
BIN=$1; TAG=$2; N=${3:-40}; SETTLE=${4:-90}; W=${5:-180}; shift $(( $# < 5 ? $# : 5 ))
D=$(mktemp -d /tmp/idle-perf-$TAG-XXXX)
"$BIN" testnet up --nodes "$N" --zones $(( N < 4 ? N : 4 )) --dir "$D" "$@" >"$D.up.log" 2>&1 || { echo "testnet up failed: $D.up.log"; exit 1; }
trap '"$BIN" testnet down --dir "$D" >/dev/null 2>&1' EXIT
sleep "$SETTLE"
PIDS=$(for f in "$D"/node-*/node.json; do python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$f"; done | paste -sd,)
tick=$(getconf CLK_TCK)
cpu_ticks() { local t=0 s; for p in ${PIDS//,/ }; do s=$(awk '{print $14+$15}' "/proc/$p/stat" 2>/dev/null || echo 0); t=$((t + s)); done; echo "$t"; }
a=$(cpu_ticks)
out=$(perf stat -x, -e task-clock,context-switches -p "$PIDS" -- sleep "$W" 2>&1)
b=$(cpu_ticks)
tc=$(echo "$out" | awk -F, '/task-clock/{print $1}')
cs=$(echo "$out" | awk -F, '/context-switches/{print $1}')
echo "$TAG nodes=$N window=${W}s task_clock=$(echo "scale=2; $tc/10/$W" | bc)% proc=$(echo "scale=2; ($b-$a)*100/$tick/$W" | bc)%" \
  "per_node_ms_s=$(echo "scale=3; $tc/$W/$N" | bc) cs_per_node_s=$(echo "scale=1; $cs/$W/$N" | bc) load=$(cut -d' ' -f1-3 /proc/loadavg)"
