#!/bin/bash
cd /work/main
export KUBECONFIG=/work/main/.cluster/kubeconfig PATH=/root/.cache/cubepod/bin:$PATH
summ() {
  f=$(ls -t bench/results/*.json | head -1)
  echo "$1 $(date +%T) $f $(python3 -c "
import json,sys;d=json.load(open('$f'))['results']
w=d.get('warmClaim')
print('c1',w['concurrency1']['p50'],w['concurrency1']['p95'],w['concurrency1']['p99'],'claimed',w['concurrency1']['claimed'],'api',w['concurrency1']['insideApiServerP50'],'rest',w['concurrency1']['restP50'],'quiet',w['concurrency1QuietPool']['p50'],'c20',w['concurrency20']['p50'], w['concurrency20']['p99'])
")" >> /tmp/exp2-summary.txt
}
for v in 0 100 0 100; do
  bash hack/cluster/module.sh stop >/dev/null 2>&1
  CUBEPOD_EVENT_QUIET_MS=$v LOG_LEVEL=warn bash hack/cluster/module.sh start >/dev/null 2>&1
  sleep 5
  CUBEPOD_EVENT_QUIET_MS=$v LOG_LEVEL=warn npm run bench -- warm > /tmp/exp2-$v.log 2>&1; summ quiet$v
done
bash hack/cluster/module.sh stop >/dev/null 2>&1
LOG_LEVEL=warn bash hack/cluster/module.sh start >/dev/null 2>&1
echo done >> /tmp/exp2-summary.txt
