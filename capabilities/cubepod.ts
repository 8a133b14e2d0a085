import { a, Capability, Log } from "pepr";
import { CubePodTemplate, PodBox, PodWarmPool } from "./api/kinds";
import { ControlKey } from "./admission/control-key";
import { SandboxPodInjector } from "./admission/inject-pod";
import {
  validateBoxRequest,
  validateTemplateRequest,
  validateWarmPoolRequest,
} from "./admission/validate";
import { stampShard } from "./admission/shard-label";
import { usePoddInjectorImage } from "./api/podd-injector";
import { loadConfig } from "./config";
import { LABEL_TEMPLATE } from "./manifests/labels";
import { slim, watchEveryPhase } from "./kit/watched";
import { MODULE_WATCHES } from "./watches";
import { Operator } from "./operator";
import { USER_AGENT } from "./client/api-client";
import { defaultCredentials } from "./client/kubeconfig";
import { ShardClient } from "./shard/shard-client";

/**
 * The module's configuration, read once: a bad setting stops the module here, with a message
 * naming the variable, before anything is served.
 */
export const config = loadConfig();
// Templates that name no podd injector get the install's (the chart's images values).
usePoddInjectorImage(config.poddInjectorImage);

/**
 * The reconcilers, claims and reaper; started from the module's entry (pepr.ts). With sharded
 * watchers, what admission creates (a namespace's sandbox policy) carries its shard label too.
 */
export const operator = new Operator(
  config,
  config.shards.count > 1
    ? new ShardClient(config.apiTimeoutMs, defaultCredentials, USER_AGENT, config.shards.count)
    : undefined,
);

// The gateway's key is made at the first start in a cluster, never in the build.
const controlKey = new ControlKey(operator.client, config.network.gatewayNamespace);
controlKey.ensure(message => Log.warn(message));
const injector = new SandboxPodInjector(operator.client, operator.network, controlKey, config);

/** The CubePod capability: admission for sandbox Pods and the three CubePod kinds. */
export const CubePod = new Capability({
  name: "cubepod",
  description: "Runs AI-agent sandboxes: PodTemplate, PodWarmPool and PodBox.",
});

const { When, OnSchedule } = CubePod;

// A Pod labelled with a PodTemplate gets podd-installer and the egress sidecar injected.
When(a.Pod)
  .IsCreated()
  .WithLabel(LABEL_TEMPLATE)
  .Mutate(req => injector.inject(req));

// PodTemplates must satisfy their schema and cross-field rules, and their author must hold the
// rights a template lends (create Pods, get the Secrets it names).
When(CubePodTemplate)
  .IsCreatedOrUpdated()
  .Validate(req =>
    validateTemplateRequest(req, operator.client, {
      vmRuntimeClasses: config.vmRuntimeClasses,
      gvisorRuntimeClasses: config.gvisorRuntimeClasses,
      egressAgent: config.network.egressAgent !== undefined,
    }),
  );

// PodWarmPools must satisfy their schema.
When(PodWarmPool).IsCreatedOrUpdated().Validate(validateWarmPoolRequest);

// With sharded watchers, CubePod's kinds are stamped with their namespace's shard label.
for (const kind of [CubePodTemplate, PodWarmPool, PodBox]) {
  When(kind)
    .IsCreatedOrUpdated()
    .Mutate(req => stampShard(req, config.shards.count));
}

// PodBoxes must satisfy their schema, immutability, monotonic rootfsGeneration and ref rules.
When(PodBox)
  .IsCreatedOrUpdated()
  .Validate(req => validateBoxRequest(req, operator.client));

// With more than one shard, each replica runs its own watches and reaper for the shards it holds
// (capabilities/shard), and none of the bindings below is registered.
if (config.shards.count === 1) {
  // Every change of a PodBox is reconciled (ordered per box), its deletion included (a finalizer
  // holds it).
  When(PodBox)
    .IsCreatedOrUpdated()
    .Reconcile(async box => operator.boxes.onBoxEvent(slim(box)));

  // The module's other watches (watches.ts) each serve every phase (one watch and one cache per
  // kind and label, not two) and keep only the metadata of what they have read.
  watchEveryPhase(CubePod, () => {
    for (const w of MODULE_WATCHES) {
      const binding = When(w.model).IsCreatedOrUpdated();
      (w.label ? binding.WithLabel(...w.label) : binding).Watch((obj, phase) =>
        w.handle(operator, obj, phase === "DELETED"),
      );
    }
  });

  // A PodWarmPool keeps spec.replicas standbys of its template, replacing stale ones gradually;
  // boxes waiting for it look again.
  When(PodWarmPool)
    .IsCreatedOrUpdated()
    .Reconcile(async pool => operator.onPoolEvent(slim(pool)));

  // The reaper: idle unleased boxes are paused, expired paused ones terminated.
  OnSchedule({
    name: "cubepod-reaper",
    every: config.reaperIntervalSeconds,
    unit: "seconds",
    run: () => void operator.reaper.pass(),
  });
}
