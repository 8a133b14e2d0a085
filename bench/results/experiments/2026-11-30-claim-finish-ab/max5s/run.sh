#!/bin/bash
# Second round: the finish waits at most 5 s (as Events do), so that a 40-claim series runs
# without any finish; three pairs alternating, the first arm finishing at once.
cd /work/main
export KUBECONFIG=/work/main/.cluster/kubeconfig PATH=/root/.cache/cubepod/bin:$PATH
out=bench/results/experiments/2026-11-30-claim-finish-ab/max5s
summ() {
  f=$(ls -t bench/results/*.json | head -1)
  mv "$f" "$out/$(basename "$f" .json)-$1.json"
  echo "$1 $(date +%T) $(python3 -c "
import json;d=json.load(open('$out/$(basename "$f" .json)-$1.json'))['results']
w=d['warmClaim']; c=w['concurrency1']
print('b2b p50/p95/p99',c['p50'],c['p95'],c['p99'],'claimed',c['claimed'],'api',c['insideApiServerP50'],'rest',c['restP50'],'| one at a time p50',w['concurrency1QuietPool']['p50'],'| c20 p50/p99',w['concurrency20']['p50'],w['concurrency20']['p99'])
")" >> $out/summary.txt
}
for v in 0 100 0 100 0 100; do
  bash hack/cluster/module.sh stop >/dev/null 2>&1
  CUBEPOD_CLAIM_FINISH_QUIET_MS=$v CUBEPOD_CLAIM_FINISH_MAX_DELAY_MS=5000 LOG_LEVEL=warn bash hack/cluster/module.sh start >/dev/null 2>&1
  sleep 5
  LOG_LEVEL=warn npm run bench -- warm > /tmp/finish-ab2-$v.log 2>&1; summ finish$v
done
bash hack/cluster/module.sh stop >/dev/null 2>&1
LOG_LEVEL=warn bash hack/cluster/module.sh start >/dev/null 2>&1
echo done >> $out/summary.txt
