#!/usr/bin/env bash
# Alternates the pool's longest wait for quiet before it replenishes (CUBEPOD_REPLENISH_MAX_DELAY_MS)
# and runs the stream benchmark (one claim every 250 ms, then every 125 ms, 30 s each, pool of 25)
# for each value given; copies each result here with the value in its name.
# Usage (from the repository root, control plane up): bash <this dir>/run.sh 5000 2000 ...
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for d in "$@"; do
  bash hack/cluster/module.sh stop >/dev/null 2>&1
  CUBEPOD_REPLENISH_MAX_DELAY_MS=$d LOG_LEVEL=warn bash hack/cluster/module.sh start >/dev/null
  CUBEPOD_REPLENISH_MAX_DELAY_MS=$d LOG_LEVEL=warn npm run bench -- stream >"$here/last.log" 2>&1
  f=$(grep -o 'bench/results/[^ ]*\.json' "$here/last.log" | tail -1)
  mv "$f" "$here/$(basename "$f" .json)-max$d.json"
done
rm -f "$here/last.log"
