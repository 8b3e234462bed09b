#!/usr/bin/env bash
# The common testnet flows, one after another: start a mesh, look at it,
# run workflows, kill a node mid-run, stop everything.
# Usage: testnet/demo.sh [BEDWE_BINARY]
set -euo pipefail
bin=${1:-bedwe}
dir=$(mktemp -d /tmp/bedwe-tn-XXXX)
trap '"$bin" testnet down --dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT

"$bin" testnet up --nodes 6 --zones 3 --dir "$dir"
"$bin" testnet status --dir "$dir"
"$bin" peers --testnet "$dir"

# The paper's workflow, waiting for the result.
echo 'S1 S2 FORK(S3 CHOICE(S4, S5) ENDCHOICE S6, S7 S8) SYNC S9 S10' |
  "$bin" submit - --testnet "$dir" --wait

# A failing step: the error names the step, the peer and the cause (exit 2).
echo 'S1 failX S2' | "$bin" submit - --testnet "$dir" --wait || echo "(failed as expected)"

# Kill the peer running a step while workflows run; everything still completes.
"$bin" testnet chaos --dir "$dir" --scenario executor --workflows 3
