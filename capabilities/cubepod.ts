import { a, Capability } from "pepr";
import { CubePodTemplate, PodBox, PodWarmPool } from "./api/kinds";
import { SandboxPodInjector } from "./admission/inject-pod";
import {
  validateBoxRequest,
  validateTemplateRequest,
  validateWarmPoolRequest,
} from "./admission/validate";
import { loadConfig } from "./config";
import {
  LABEL_BOX,
  LABEL_MANAGED_BY,
  LABEL_POOL,
  LABEL_SEED_OF,
  LABEL_TEMPLATE,
  LABEL_VOLUME_KEY,
  MANAGED_BY,
} from "./manifests/labels";
import { keepMetadata, slim, watchEveryPhase } from "./kit/watched";
import { templateOfPolicy } from "./network/reconciler";
import { Operator } from "./operator";

/**
 * The module's configuration, read once: a bad setting stops the module here, with a message
 * naming the variable, before anything is served.
 */
export const config = loadConfig();

/** The reconcilers, claims and reaper; started from the module's entry (pepr.ts). */
export const operator = new Operator(config);

const injector = new SandboxPodInjector(operator.client, operator.network, config);

/** The CubePod capability: admission for sandbox Pods and the three CubePod kinds. */
export const CubePod = new Capability({
  name: "cubepod",
  description: "Runs AI-agent sandboxes: PodTemplate, PodWarmPool and PodBox.",
});

const { When, OnSchedule } = CubePod;

// A Pod labelled with a PodTemplate gets podd-installer, the egress sidecar and mTLS injected.
When(a.Pod)
  .IsCreated()
  .WithLabel(LABEL_TEMPLATE)
  .Mutate(req => injector.inject(req));

// PodTemplates must satisfy their schema and cross-field rules, and their author must hold the
// rights a template lends (create Pods, get the Secrets it names).
When(CubePodTemplate)
  .IsCreatedOrUpdated()
  .Validate(req => validateTemplateRequest(req, operator.client, config.vmRuntimeClasses));

// PodWarmPools must satisfy their schema.
When(PodWarmPool).IsCreatedOrUpdated().Validate(validateWarmPoolRequest);

// PodBoxes must satisfy their schema, immutability, monotonic rootfsGeneration and ref rules.
When(PodBox)
  .IsCreatedOrUpdated()
  .Validate(req => validateBoxRequest(req, operator.client));

// Every change of a PodBox is reconciled (ordered per box), its deletion included (a finalizer
// holds it).
When(PodBox)
  .IsCreatedOrUpdated()
  .Reconcile(async box => operator.boxes.onBoxEvent(slim(box)));

// The watches below each serve every phase (one watch and one cache per kind and label, not two)
// and keep only the metadata of what they have read (see kit/watched.ts).
const DELETED = "DELETED";
watchEveryPhase(CubePod, () => {
  // Sandbox Pods (labelled with their box) report readiness, IP and deletion to their box: a
  // deleted one lets its box move on (pause, reset, resume, cleanup).
  When(a.Pod)
    .IsCreatedOrUpdated()
    .WithLabel(LABEL_BOX)
    .Watch((pod, phase) => {
      operator.boxes.onPodEvent(pod, phase === DELETED);
      keepMetadata(pod);
    });

  // The NetworkPolicies CubePod owns are applied again when someone changes or deletes them.
  When(a.NetworkPolicy)
    .IsCreatedOrUpdated()
    .WithLabel(LABEL_MANAGED_BY, MANAGED_BY)
    .Watch(np => {
      const { namespace, name, labels } = np.metadata ?? {};
      operator.network.onPolicyEvent(namespace!, name!, templateOfPolicy(labels));
      keepMetadata(np);
    });

  // A PodTemplate that appears, changes or goes wakes the boxes and pools that use it (they report
  // a missing one), and its sandboxes' NetworkPolicies follow it.
  When(CubePodTemplate)
    .IsCreatedOrUpdated()
    .Watch(tpl => operator.onTemplateEvent(slim(tpl)));

  // CubePod's PVCs wake the boxes that wait for them (volumes to re-attach, or to finish going).
  When(a.PersistentVolumeClaim)
    .IsCreatedOrUpdated()
    .WithLabel(LABEL_VOLUME_KEY)
    .Watch(pvc => {
      operator.onVolumeEvent(pvc);
      keepMetadata(pvc);
    });

  // Templates' seed PVCs feed the index of filled seeds that new rootfs volumes are cloned from;
  // they and their fill Pods bring their template's seed reconcile back.
  When(a.PersistentVolumeClaim)
    .IsCreatedOrUpdated()
    .WithLabel(LABEL_SEED_OF)
    .Watch((pvc, phase) => {
      operator.seeds.onVolumeEvent(pvc, phase === DELETED);
      keepMetadata(pvc);
    });
  When(a.Pod)
    .IsCreatedOrUpdated()
    .WithLabel(LABEL_SEED_OF)
    .Watch((pod, phase) => {
      operator.seeds.onPodEvent(pod, phase === DELETED);
      keepMetadata(pod);
    });

  // Standby Pods feed the index of ready standbys that claims pick from; their pool looks again. A
  // standby that is deleted or claimed leaves the index and its pool replenishes; a claimed one
  // keeps these labels until its claim's finish, and tells its box meanwhile.
  When(a.Pod)
    .IsCreatedOrUpdated()
    .WithLabel(LABEL_POOL)
    .Watch((pod, phase) => {
      operator.onStandbyEvent(pod, phase === DELETED);
      keepMetadata(pod);
    });
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
