#!/usr/bin/env bash
# Runs every chaos scenario on a fresh 8-node, 3-zone testnet of real
# processes and prints one JSON summary per line (the README's chaos table).
# Usage: testnet/chaos-table.sh [BEDWE_BINARY] [WORKFLOWS]
set -euo pipefail
bin=${1:-bedwe}
workflows=${2:-5}
for s in executor consecutive join-holder origin zone blackout flap; do
  "$bin" testnet chaos run --nodes 8 --zones 3 --scenario "$s" --workflows "$workflows" --seed 7 -o json 2>/dev/null | tr -d '\n '
  echo
done
