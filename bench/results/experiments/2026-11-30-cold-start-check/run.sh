#!/bin/bash
cd /work/main
export KUBECONFIG=/work/main/.cluster/kubeconfig PATH=/root/.cache/cubepod/bin:$PATH
for rev in 92076b3 HEAD 92076b3 HEAD; do
  git checkout $rev -- capabilities test bench/floor-operator.ts; [ $rev = HEAD ] && rm -f capabilities/reconcilers/event-sink.ts test/unit/event-sink.test.ts; git reset -q HEAD -- . 
  bash hack/cluster/module.sh stop >/dev/null 2>&1
  LOG_LEVEL=warn bash hack/cluster/module.sh start >/dev/null 2>&1
  sleep 5
  LOG_LEVEL=warn npm run bench -- cold > /tmp/cold-$rev.log 2>&1
  f=$(ls -t bench/results/*.json | head -1)
  echo "$rev $(date +%T) $f $(python3 -c "
import json;d=json.load(open('$f'))['results'];c=d['coldStart'];w=d['wakeUp']
print('toPod p50/p99',c['toPod']['p50'],c['toPod']['p99'],'toRunning p50/p99',c['toRunning']['p50'],c['toRunning']['p99'],'| patch after idle p50',w['patchAfterIdle']['p50'])")" >> /tmp/cold-ab.txt
done
git checkout HEAD -- capabilities test bench/floor-operator.ts; rm -f capabilities/reconcilers/event-sink.ts test/unit/event-sink.test.ts; git reset -q HEAD -- .
bash hack/cluster/module.sh stop >/dev/null 2>&1
LOG_LEVEL=warn bash hack/cluster/module.sh start >/dev/null 2>&1
echo done >> /tmp/cold-ab.txt
