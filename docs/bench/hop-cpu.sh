#!/bin/bash
# hop-cpu.sh BIN TAG [NODES] [STEPS] [RUNS] [PROFILE_PREFIX]
#
# CPU per step of a no-op sequence, summed over all node processes and net
# of idle: starts a loopback testnet of NODES (default 8) `bedwe
# node` processes of BIN with the bench's services, measures idle CPU for
# 10 s, runs one warm-up (WARMUP) and then RUNS (default 5) sequences of STEPS
# (default 200) echo steps one after another with `bedwe submit --wait`,
# and prints wall time, CPU per step net of idle (utime+stime from /proc;
# idle is measured for 10 s before and after the runs, and the mean used)
# and, from every node's /metrics, the journal commits and the streams
# served by protocol per step (bedwe_streams_served_total) and the requests
# served on shared sessions (bedwe_mux_requests_served_total). With
# PROFILE_PREFIX it also saves a 20 s CPU profile of every node
# (BEDWE_TESTNET_PPROF) as
# PREFIX.node-I.pprof. Run it on an otherwise quiet machine and alternate
# the binaries being compared (docs/benchmarks.md).
#
# Environment: READS=1 gives every step reads=() (it reads no earlier
# output: echo outputs stop growing, and outputs nobody ahead reads may
# leave the pack); WARMUP=K runs K warm-up sequences instead of one (a mesh
# whose nodes connect only when work needs it makes most of its connections
# in its first thousand hops);
# NODE_FLAGS="--stash-min 0" (words) are
# appended to every node's command line. The last line gives the largest
# and the mean size of the packs handed to another node (events' bytes).
set -euo pipefail
BIN=$1; TAG=$2; N=${3:-8}; STEPS=${4:-200}; RUNS=${5:-5}; PROF=${6:-}
D=$(mktemp -d /tmp/hop-$TAG-XXXX)
"$BIN" bench --print-services > "$D.services.yaml"
if [ -n "$PROF" ]; then export BEDWE_TESTNET_PPROF=1; fi
nodeflags=(); for f in ${NODE_FLAGS:-}; do nodeflags+=("--node-flag=$f"); done
"$BIN" testnet up --nodes "$N" --zones 4 --dir "$D" --services "$D.services.yaml" --announce 5s "${nodeflags[@]}" >"$D.up.log" 2>&1 || { echo "testnet up failed: $D.up.log"; exit 1; }
trap '"$BIN" testnet down --dir "$D" >/dev/null 2>&1' EXIT
attr=""; if [ -n "${READS:-}" ]; then attr="[reads=()]"; fi
wf="$D.wf.bedwe"; : > "$wf"; for i in $(seq 1 "$STEPS"); do printf 'n%d%s ' "$i" "$attr" >> "$wf"; done; echo >> "$wf"
sleep 15
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2],""))' "$1" "$2"; }
pids=$(for f in "$D"/node-*/node.json; do field "$f" pid; done)
tick=$(getconf CLK_TCK)
cpu_ticks() { local t=0 s; for p in $pids; do s=$(awk '{print $14+$15}' "/proc/$p/stat" 2>/dev/null || echo 0); t=$((t + s)); done; echo "$t"; }
counts() { # journal commits and streams served by protocol, summed over the nodes
	python3 - "$D" <<'PY'
import glob, json, re, sys, urllib.request
tot = {}
for f in glob.glob(sys.argv[1] + "/node-*/node.json"):
    try:
        txt = urllib.request.urlopen("http://%s/metrics" % json.load(open(f))["http"], timeout=5).read().decode()
    except Exception:
        continue
    for line in txt.splitlines():
        m = re.match(r'bedwe_streams_served_total\{protocol="([^"]+)"\} (\S+)', line)
        r = re.match(r'bedwe_mux_requests_served_total\{protocol="([^"]+)"\} (\S+)', line)
        if m:
            tot["streams " + m.group(1)] = tot.get("streams " + m.group(1), 0) + float(m.group(2))
        elif r:
            tot["mux requests " + r.group(1)] = tot.get("mux requests " + r.group(1), 0) + float(r.group(2))
        elif line.startswith("bedwe_journal_write_duration_seconds_count"):
            tot["journal commits"] = tot.get("journal commits", 0) + float(line.split()[-1])
print(json.dumps(tot))
PY
}
a=$(cpu_ticks); sleep 10; b=$(cpu_ticks); idle_per_s=$(echo "scale=4; ($b-$a)/$tick/10" | bc)
for w in $(seq 1 "${WARMUP:-1}"); do "$BIN" submit "$wf" --testnet "$D" --wait >/dev/null 2>&1 || echo "warm-up $w failed"; done
if [ -n "$PROF" ]; then
	for f in "$D"/node-*/node.json; do
		curl -s -o "$PROF.$(basename "$(dirname "$f")").pprof" "http://$(field "$f" http)/debug/pprof/profile?seconds=20" &
	done
fi
c0=$(counts); t0=$(date +%s.%N); a=$(cpu_ticks)
for r in $(seq 1 "$RUNS"); do "$BIN" submit "$wf" --testnet "$D" --wait >/dev/null 2>&1 || echo "run $r failed"; done
b=$(cpu_ticks); t1=$(date +%s.%N); c1=$(counts)
wall=$(echo "$t1-$t0" | bc)
load=$(cut -d' ' -f1-3 /proc/loadavg)
# Idle again after the runs: a 40-node mesh may still be settling in the
# first window, so the net figure uses the mean of the two.
sleep 3; a2=$(cpu_ticks); sleep 10; b2=$(cpu_ticks); idle_after=$(echo "scale=4; ($b2-$a2)/$tick/10" | bc)
idle_mean=$(echo "scale=4; ($idle_per_s+$idle_after)/2" | bc)
net=$(echo "scale=4; ($b-$a)/$tick - $idle_mean*$wall" | bc)
echo "$TAG nodes=$N steps=$STEPS runs=$RUNS wall=${wall}s per_workflow=$(echo "scale=3; $wall/$RUNS" | bc)s cpu_per_step_net=$(echo "scale=3; $net*1000/($STEPS*$RUNS)" | bc)ms idle_before=$(echo "scale=1; $idle_per_s*100" | bc)% idle_after=$(echo "scale=1; $idle_after*100" | bc)% load=$load"
python3 - "$c0" "$c1" $((STEPS * RUNS)) <<'PY'
import json, sys
a, b, steps = json.loads(sys.argv[1]), json.loads(sys.argv[2]), float(sys.argv[3])
for k in sorted(set(a) | set(b)):
    d = b.get(k, 0) - a.get(k, 0)
    if d:
        print("  %-40s %7.2f per step" % (k, d / steps))
PY
python3 - "$D" <<'PY'
import glob, json, sys
sizes, stashes = [], 0
for f in glob.glob(sys.argv[1] + "/node-*/events.jsonl"):
    for line in open(f):
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("type") == "hand-off" and e.get("bytes"):
            sizes.append(e["bytes"])
        elif e.get("type") == "stashed" and e.get("outcome") == "ok":
            stashes += 1
if sizes:
    print("  packs handed to another node: largest %d bytes, mean %d bytes; %d stashes" % (max(sizes), sum(sizes) / len(sizes), stashes))
PY
wait
