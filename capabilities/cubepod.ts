import { a, Capability } from "pepr";
import { CubePodTemplate, PodBox, PodWarmPool } from "./api/kinds";
import { injectSandboxPod } from "./admission/inject-pod";
import {
  validateBoxRequest,
  validateTemplateRequest,
  validateWarmPoolRequest,
} from "./admission/validate";
import { LABEL_TEMPLATE } from "./manifests/labels";

/** The CubePod capability: admission for sandbox Pods and the three CubePod kinds. */
export const CubePod = new Capability({
  name: "cubepod",
  description: "Runs AI-agent sandboxes: PodTemplate, PodWarmPool and PodBox.",
});

const { When } = CubePod;

// A Pod labelled with a PodTemplate gets podd-installer, the egress sidecar and mTLS injected.
When(a.Pod).IsCreated().WithLabel(LABEL_TEMPLATE).Mutate(injectSandboxPod);

// PodTemplates must satisfy their schema and cross-field rules.
When(CubePodTemplate).IsCreatedOrUpdated().Validate(validateTemplateRequest);

// PodWarmPools must satisfy their schema.
When(PodWarmPool).IsCreatedOrUpdated().Validate(validateWarmPoolRequest);

// PodBoxes must satisfy their schema, immutability, monotonic rootfsGeneration and ref rules.
When(PodBox).IsCreatedOrUpdated().Validate(validateBoxRequest);
