#!/bin/bash
# A/B of the claim finish's wait: CUBEPOD_CLAIM_FINISH_QUIET_MS=0 finishes each claim at once
# (the behaviour before 3e9c247, but for the finalizer and the handover going together), 100 waits
# until claims have been quiet for 100 ms. Alternating `warm` runs, then one `floor` run.
cd /work/main
export KUBECONFIG=/work/main/.cluster/kubeconfig PATH=/root/.cache/cubepod/bin:$PATH
out=bench/results/experiments/2026-11-30-claim-finish-ab
summ() {
  f=$(ls -t bench/results/*.json | head -1)
  cp "$f" "$out/$(basename "$f" .json)-$1.json"
  echo "$1 $(date +%T) $(python3 -c "
import json;d=json.load(open('$f'))['results']
w=d.get('warmClaim')
if w:
  c=w['concurrency1']
  print('b2b p50/p95/p99',c['p50'],c['p95'],c['p99'],'claimed',c['claimed'],'api',c['insideApiServerP50'],'rest',c['restP50'],'| one at a time p50',w['concurrency1QuietPool']['p50'],'| c20 p50/p99',w['concurrency20']['p50'],w['concurrency20']['p99'])
f=d.get('warmClaimFloor')
if f: print('| floor b2b p50/p95/p99',f['concurrency1']['p50'],f['concurrency1']['p95'],f['concurrency1']['p99'],'one at a time p50',f['concurrency1QuietPool']['p50'])
")" >> $out/summary.txt
}
for v in 0 100 0 100; do
  bash hack/cluster/module.sh stop >/dev/null 2>&1
  CUBEPOD_CLAIM_FINISH_QUIET_MS=$v LOG_LEVEL=warn bash hack/cluster/module.sh start >/dev/null 2>&1
  sleep 5
  LOG_LEVEL=warn npm run bench -- warm > /tmp/finish-ab-$v.log 2>&1; summ finish$v
done
bash hack/cluster/module.sh stop >/dev/null 2>&1
LOG_LEVEL=warn bash hack/cluster/module.sh start >/dev/null 2>&1
sleep 5
LOG_LEVEL=warn npm run bench -- warm floor > /tmp/finish-ab-floor.log 2>&1; summ warmfloor100
echo done >> $out/summary.txt
