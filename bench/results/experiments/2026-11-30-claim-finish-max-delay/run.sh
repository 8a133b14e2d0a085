#!/usr/bin/env bash
# A/B: claim-finish max delay 5 s (default) vs 15 s, `bench -- warm`, interleaved, module restarted per run.
cd /work/main
for i in 1 2; do
  for v in 5000 15000; do
    bash hack/cluster/module.sh stop >/dev/null 2>&1
    CUBEPOD_CLAIM_FINISH_MAX_DELAY_MS=$v LOG_LEVEL=warn bash hack/cluster/module.sh start >/tmp/ab/mod-fin$v-$i.log 2>&1 || { echo "module $v $i failed"; continue; }
    LOG_LEVEL=warn timeout 900 npm run bench -- warm > /tmp/ab/fin$v-$i.log 2>&1
    echo "fin$v-$i $(grep -o 'saved .*json' /tmp/ab/fin$v-$i.log)"
  done
done
echo done
