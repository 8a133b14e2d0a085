#!/usr/bin/env bash
# `npm run dev`: the control plane, the module and the gateway, the samples applied, an E2B API key
# for cubepod-demo, then the module's log until Ctrl-C, which stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
. local-cluster/env.sh
bash local-cluster/up.sh
trap 'echo; bash local-cluster/down.sh' EXIT
trap 'exit 0' INT TERM
kubectl apply -f samples/namespace.yaml >/dev/null
kubectl apply -f samples/podtemplate.yaml -f samples/podwarmpool.yaml -f samples/podbox.yaml
kubectl apply -f samples/sandbox-pod.yaml
kubectl apply -f samples/real-sandbox.yaml
kubectl apply -f samples/tenant-defaults.yaml
# An API key of the gateway for cubepod-demo (only its hash is stored). The E2B example below uses
# the real node's template; the kwok samples show the operator only, their Pods running nothing.
key=e2b_$(openssl rand -hex 20)
kubectl -n cubepod-demo apply -f - >/dev/null <<EOF
apiVersion: pod.cubeplex.ai/v1alpha1
kind: PodAPIKey
metadata: { name: demo-agents }
spec: { sha256: $(printf %s "$key" | sha256sum | cut -d' ' -f1), description: "npm run dev's key" }
EOF
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
echo "real-1 really runs (podd under runc on the real node, on local volumes); step into it:"
echo "  kubectl -n cubepod-demo exec -it real-1 -c sandbox -- sh"
echo
echo "Agents use the sandboxes through the gateway with E2B's SDK (npm install e2b):"
echo "  export E2B_API_URL=http://127.0.0.1:${CUBEPOD_GATEWAY_PORT:-8080} E2B_SANDBOX_URL=http://127.0.0.1:${CUBEPOD_GATEWAY_PORT:-8080} E2B_API_KEY=$key"
cat <<'JS'
  cat > demo.mjs <<'EOF'
  import { Sandbox } from "e2b";
  const sbx = await Sandbox.create("real"); // claimed from the real node's warm pool
  await sbx.files.write("app.py", "print(sum(range(10)))\n"); // in /home/user, as `user`
  console.log((await sbx.commands.run("python app.py")).stdout);
  const server = await sbx.commands.run("python -m http.server 8000", { background: true });
  console.log((await sbx.commands.list()).map(p => p.cmd));
  await server.kill();
  const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: d => process.stdout.write(d) });
  await sbx.pty.sendInput(pty.pid, new TextEncoder().encode("uname -a; exit\n"));
  await pty.wait();
  await sbx.kill();
  EOF
  node demo.mjs
JS
echo
tail -n 20 -F "$LOGS/module.log" &
wait $!
