import { a, Capability } from "pepr";
import { CubePodTemplate, PodBox, PodWarmPool } from "./api/kinds";
import { startRuntime } from "./reconcilers/runtime";
import { injectSandboxPod } from "./admission/inject-pod";
import {
  validateBoxRequest,
  validateTemplateRequest,
  validateWarmPoolRequest,
} from "./admission/validate";
import { LABEL_BOX, LABEL_POOL, LABEL_TEMPLATE } from "./manifests/labels";
import {
  onBoxChange,
  onPoolChange,
  onSandboxPod,
  onStandbyPod,
  onStandbyPodGone,
  onTemplateChange,
  runReaper,
} from "./reconcilers/box-triggers";

/** The CubePod capability: admission for sandbox Pods and the three CubePod kinds. */
export const CubePod = new Capability({
  name: "cubepod",
  description: "Runs AI-agent sandboxes: PodTemplate, PodWarmPool and PodBox.",
});

const { When, OnSchedule } = CubePod;

// The watcher's own PodBox watch (box cache, /healthz) and the metrics server on :8081.
startRuntime();

// A Pod labelled with a PodTemplate gets podd-installer, the egress sidecar and mTLS injected.
When(a.Pod).IsCreated().WithLabel(LABEL_TEMPLATE).Mutate(injectSandboxPod);

// PodTemplates must satisfy their schema and cross-field rules.
When(CubePodTemplate).IsCreatedOrUpdated().Validate(validateTemplateRequest);

// PodWarmPools must satisfy their schema.
When(PodWarmPool).IsCreatedOrUpdated().Validate(validateWarmPoolRequest);

// PodBoxes must satisfy their schema, immutability, monotonic rootfsGeneration and ref rules.
When(PodBox).IsCreatedOrUpdated().Validate(validateBoxRequest);

// Every change of a PodBox is reconciled (ordered per box), its deletion included.
When(PodBox).IsCreatedOrUpdated().Reconcile(onBoxChange);

// Sandbox Pods (labelled with their box) report readiness, IP and deletion to their box.
When(a.Pod).IsCreatedOrUpdated().WithLabel(LABEL_BOX).Watch(onSandboxPod);

// A deleted sandbox Pod lets its box move on (pause, reset, resume, cleanup).
When(a.Pod).IsDeleted().WithLabel(LABEL_BOX).Watch(onSandboxPod);

// A PodTemplate that appears or changes wakes the boxes that use it.
When(CubePodTemplate).IsCreatedOrUpdated().Watch(onTemplateChange);

// A deleted PodTemplate is reported by the boxes that use it.
When(CubePodTemplate).IsDeleted().Watch(onTemplateChange);

// A PodWarmPool keeps spec.replicas standbys of its template, replacing stale ones gradually.
When(PodWarmPool).IsCreatedOrUpdated().Reconcile(onPoolChange);

// Standby Pods feed the in-memory index of ready standbys that claims pick from.
When(a.Pod).IsCreatedOrUpdated().WithLabel(LABEL_POOL).Watch(onStandbyPod);

// A standby Pod that is deleted or claimed leaves the index; its pool replenishes.
When(a.Pod).IsDeleted().WithLabel(LABEL_POOL).Watch(onStandbyPodGone);

// The reaper: idle unleased boxes are paused, expired paused ones terminated.
OnSchedule({
  name: "cubepod-reaper",
  // Pepr 1.1.4 refuses intervals under 10 s (and throws from a timer, ending the process).
  every: Math.max(10, Number(process.env.CUBEPOD_REAPER_INTERVAL_SECONDS ?? 10)),
  unit: "seconds",
  run: runReaper,
});
