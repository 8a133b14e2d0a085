#!/bin/bash
cd /work/main
export KUBECONFIG=/work/main/.cluster/kubeconfig PATH=/root/.cache/cubepod/bin:$PATH
summ() {
  f=$(ls -t bench/results/*.json | head -1)
  echo "$1 $(date +%T) $(python3 -c "
import json,sys;d=json.load(open('$f'))['results']
w=d.get('warmClaim');fl=d.get('warmClaimFloor')
if w: print('c1',w['concurrency1']['p50'],w['concurrency1']['p95'],w['concurrency1']['p99'],'claimed',w['concurrency1']['claimed'],'api',w['concurrency1']['insideApiServerP50'],'rest',w['concurrency1']['restP50'],'quiet',w['concurrency1QuietPool']['p50'],'c20',w['concurrency20']['p50'])
if fl: print('floor',fl['concurrency1']['p50'],fl['concurrency1']['p99'],'quiet',fl['concurrency1QuietPool']['p50'])
")" >> /tmp/exp-summary.txt
}
for round in 1 2; do
  LOG_LEVEL=warn npm run bench -- floor > /tmp/exp-floor-$round.log 2>&1; summ floor
  for v in base noevent nofinish; do
    bash hack/cluster/module.sh stop >/dev/null 2>&1
    CUBEPOD_EXPERIMENT=$v LOG_LEVEL=warn bash hack/cluster/module.sh start >/dev/null 2>&1
    sleep 5
    CUBEPOD_EXPERIMENT=$v LOG_LEVEL=warn npm run bench -- warm > /tmp/exp-$v-$round.log 2>&1; summ $v
  done
done
bash hack/cluster/module.sh stop >/dev/null 2>&1
LOG_LEVEL=warn bash hack/cluster/module.sh start >/dev/null 2>&1
echo done >> /tmp/exp-summary.txt
