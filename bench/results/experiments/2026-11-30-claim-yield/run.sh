#!/usr/bin/env bash
# A/B: old (HEAD) vs new claim-yield code, `bench -- warm stream`, interleaved, module restarted per run.
cd /work/main
swap() {
  for f in box-reconciler pool-reconciler quiet-sink; do cp /tmp/ab/$1/$f.ts capabilities/reconcilers/$f.ts; done
  cp /tmp/ab/$1/quiet-sink.test.ts test/unit/quiet-sink.test.ts
}
for i in 1 2; do
  for v in old new; do
    bash hack/cluster/module.sh stop >/dev/null 2>&1
    swap $v
    LOG_LEVEL=warn bash hack/cluster/module.sh start >/tmp/ab/mod-$v$i.log 2>&1 || { echo "module $v$i failed"; continue; }
    LOG_LEVEL=warn timeout 1200 npm run bench -- warm stream > /tmp/ab/$v$i.log 2>&1
    echo "$v$i $(grep -o 'saved .*json' /tmp/ab/$v$i.log)"
  done
done
bash hack/cluster/module.sh stop >/dev/null 2>&1
swap new
echo done
