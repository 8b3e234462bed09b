#!/bin/bash
# conns.sh BIN TAG [NODES]
#
# Connections and memory of a loopback testnet: starts NODES
# (default 40) `bedwe node` processes of BIN in 4 zones with the bench's
# services, and prints the established TCP connections per node process
# (ss), how long `testnet up` took (it returns once every node sees every
# peer), the median VmRSS and RssAnon, and the idle CPU of all nodes over
# 20 s: 60 s after start, then 30 s and 110 s after three sequences of 200
# no-op steps (reads=()). Run it on an otherwise quiet machine and alternate
# the binaries being compared (docs/benchmarks.md).
BIN=$1; TAG=$2; N=${3:-40}
D=$(mktemp -d /tmp/conns-$TAG-XXXX)
$BIN bench --print-services > $D.services.yaml
t0=$(date +%s.%N)
$BIN testnet up --nodes $N --zones 4 --dir $D --services $D.services.yaml --announce 5s > $D.up.log 2>&1 || { echo up failed; exit 1; }
echo "$TAG: testnet up (until every node sees every peer) $(echo "$(date +%s.%N) - $t0" | bc | cut -c1-5) s"
trap "$BIN testnet down --dir $D >/dev/null 2>&1" EXIT
pids=$(for f in $D/node-*/node.json; do python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' $f; done)
tick=$(getconf CLK_TCK)
cpu() { local t=0; for p in $pids; do t=$((t + $(awk '{print $14+$15}' /proc/$p/stat))); done; echo $t; }
report() {
  python3 - "$1" $pids <<'PY'
import sys, subprocess, re, statistics
tag = sys.argv[1]; pids = sys.argv[2:]
out = subprocess.run(["ss", "-tnpH", "state", "established"], capture_output=True, text=True).stdout
per = {p: [] for p in pids}
for line in out.splitlines():
    m = re.search(r'pid=(\d+)', line)
    if m and m.group(1) in per:
        cols = line.split()
        per[m.group(1)].append(cols[-2] if len(cols) >= 2 else "")
conns = [len(v) for v in per.values()]
rss = []; anon = []
for p in pids:
    s = open("/proc/%s/status" % p).read()
    rss.append(int(re.search(r'VmRSS:\s+(\d+)', s).group(1)) / 1024)
    anon.append(int(re.search(r'RssAnon:\s+(\d+)', s).group(1)) / 1024)
print("%s: TCP connections per node median %d (min %d, max %d), total %d; VmRSS median %.1f MiB, RssAnon median %.1f MiB" % (
    tag, statistics.median(conns), min(conns), max(conns), sum(conns), statistics.median(rss), statistics.median(anon)))
PY
}
idle() { local a b; a=$(cpu); sleep 20; b=$(cpu); echo "$1: idle CPU, all nodes, over 20 s: $(echo "scale=1; ($b-$a)*100/$tick/20" | bc) % of one core"; }
sleep 60
report "$TAG fresh"; idle "$TAG fresh"
wf=$D.wf.bedwe; : > $wf; for i in $(seq 1 200); do printf 'n%d[reads=()] ' $i >> $wf; done; echo >> $wf
for r in 1 2 3; do $BIN submit $wf --testnet $D --wait > /dev/null 2>&1 || echo "run $r failed"; done
sleep 30
report "$TAG after work +30s"; idle "$TAG after work +30s"
sleep 60
report "$TAG after work +110s"; idle "$TAG after work +110s"
