#!/usr/bin/env bash
# Runs every chaos scenario on a fresh 8-node, 3-zone testnet of real
# processes and prints one JSON summary per line; with --markdown (needs jq)
# it prints the README's chaos table instead.
# Usage: testnet/chaos-table.sh [BEDWE_BINARY] [WORKFLOWS] [--markdown]
# A scenario whose run finds a fault (exit status 2) is still printed.
set -euo pipefail
bin=${1:-bedwe}
workflows=${2:-5}
format=${3:-json}
scenarios="executor consecutive join-holder origin zone blackout flap sender-after-ack join-and-branch pair-random zone-plus-one join-paused"
if [ "$format" = --markdown ]; then
  echo "| scenario | killed (SIGKILL) | submitted | completed | failed at-most-once | failed | lost | duplicate outputs | results ≠ fault-free | executions | executions duplicated | once violations | chains superseded | steps re-run | detection p50 ms | makespan ms |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
fi
for s in $scenarios; do
  out=$("$bin" testnet chaos run --nodes 8 --zones 3 --scenario "$s" --workflows "$workflows" --seed 7 -o json 2>/dev/null) || true
  if [ -z "$out" ]; then
    echo "{\"scenario\":\"$s\",\"error\":\"the run printed no summary\"}" >&2
    continue
  fi
  if [ "$format" = --markdown ]; then
    printf '%s' "$out" | jq -r '"| \(.scenario) | \(.killed_pids|length) | \(.submitted) | \(.completed) | \(.failed_at_most_once) | \(.failed) | \(.lost) | \(.duplicate_outputs) | \(.result_mismatches) | \(.executions) | \(.executions_duplicated) | \(.once_violations) | \(.chains_superseded) | \(.steps_rerun) | \(if .detections > 0 then .detection_ms_p50 else "–" end) | \(.makespan_ms) |"'
  else
    if command -v jq >/dev/null; then
      printf '%s' "$out" | jq -c .
    else
      printf '%s' "$out" | tr -d '\n'
      echo
    fi
  fi
done
