#!/usr/bin/env bash
# `npm run dev`: the control plane and the module, the samples applied, then the module's log
# until Ctrl-C, which stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/cluster/env.sh
bash hack/cluster/up.sh
trap 'echo; bash hack/cluster/down.sh' EXIT
trap 'exit 0' INT TERM
kubectl apply -f samples/namespace.yaml >/dev/null
kubectl apply -f samples/podtemplate.yaml -f samples/podwarmpool.yaml -f samples/podbox.yaml
kubectl apply -f samples/sandbox-pod.yaml
# A session starting again counts as activity, as a gateway would record it: sample boxes the
# reaper paused while nobody used them (idleTimeoutSeconds) resume. Metadata only: no webhook call.
kubectl -n cubepod-demo annotate pbox --all --overwrite \
  "pod.cubeplex.ai/last-activity=$(date -u +%Y-%m-%dT%H:%M:%SZ)" >/dev/null
# The boxes come up through watch events; wait for them (kubectl wait watches too).
kubectl -n cubepod-demo wait --for=jsonpath='{.status.phase}'=Running pbox --all --timeout=90s \
  >/dev/null || echo "(some boxes are not Running yet)"
echo
# `podtemplates` alone is core/v1's PodTemplate: use the short name (or podtemplates.pod.cubeplex.ai).
kubectl -n cubepod-demo get ptpl,pwp,pbox,pods,pvc -o wide
echo
echo "The module's log follows (Ctrl-C stops everything). In another shell:"
echo "  export KUBECONFIG=$KUBECONFIG_FILE PATH=$CUBEPOD_BIN:\$PATH"
echo "  kubectl -n cubepod-demo get ptpl,pwp,pbox,pods,pvc"
echo
tail -n 20 -F "$LOGS/module.log" &
wait $!
