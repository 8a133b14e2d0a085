import { DEFAULT_PODD_INJECTOR_IMAGE } from "../../../capabilities/api/podd-injector";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { DEFAULT_VM_RUNTIME_CLASSES } from "../../../capabilities/config";
import {
  blockModeRule,
  egressAgentRule,
  sidecarRuntimeRule,
  PodBoxContext,
  validatePodBox,
  validatePodTemplate,
  validatePodWarmPool,
  nameRule,
} from "../../../capabilities/admission/rules";

type Case = {
  kind: "PodTemplate" | "PodWarmPool" | "PodBox";
  spec: unknown;
  ctx?: Partial<PodBoxContext>;
  message: string;
};

const tpl = (extra: object) => ({ image: "ghcr.io/x/sandbox:1", ...extra });
const pool = (extra: object) => ({ templateRef: "python", replicas: 2, ...extra });
const box = (extra: object) => ({ templateRef: "python", ...extra });
const was = (oldSpec: object) => ({ oldSpec });

const IMAGE = "must be a container image reference (not empty, no whitespace)";
const SIZE = "must be a Kubernetes quantity such as 10Gi";
const QUANTITY = "must be a Kubernetes quantity such as 500m or 2Gi";
const MTLS_REMOVED =
  "spec.mtls: removed (docs/decisions/0027-mtls-left-to-the-cluster-network.md): CubePod does not issue per-Pod certificates; encrypt Pod traffic with the cluster network (CNI encryption or a service mesh)";
const SAME_NS = (kind: string) =>
  `must be the name of a ${kind} in the same namespace (lowercase RFC 1123 subdomain)`;

/** Every invalid spec with the exact message the webhook answers. */
const INVALID: Case[] = [
  // PodTemplate
  { kind: "PodTemplate", spec: {}, message: "spec.image: is required" },
  { kind: "PodTemplate", spec: undefined, message: "spec: is required" },
  { kind: "PodTemplate", spec: tpl({ image: "" }), message: `spec.image: ${IMAGE}` },
  {
    kind: "PodTemplate",
    spec: tpl({ image: "python 3" }),
    message: `spec.image: ${IMAGE}`,
  },
  {
    kind: "PodTemplate",
    spec: tpl({ image: 42 }),
    message: "spec.image: must be a string (got 42)",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ runtimeClassName: "Kata_QEMU" }),
    message:
      "spec.runtimeClassName: must be a RuntimeClass name, or empty for the cluster's default runtime",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ volumeMode: "Raw" }),
    message: 'spec.volumeMode: must be one of "Block", "Filesystem" (got "Raw")',
  },
  {
    kind: "PodTemplate",
    spec: tpl({ storageClassName: "Fast_SSD" }),
    message:
      "spec.storageClassName: must be the name of a StorageClass (lowercase RFC 1123 subdomain)",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ rootfs: { size: "ten gigs" } }),
    message: `spec.rootfs.size: ${SIZE}`,
  },
  {
    kind: "PodTemplate",
    spec: tpl({ workspace: { size: "" } }),
    message: `spec.workspace.size: ${SIZE}`,
  },
  // Stored before, failing only when a PVC or Pod was made from them.
  {
    kind: "PodTemplate",
    spec: tpl({ rootfs: { size: "1.2.3Gi" } }),
    message: `spec.rootfs.size: ${SIZE}`,
  },
  {
    kind: "PodTemplate",
    spec: tpl({ rootfs: { size: "-10Gi" } }),
    message: "spec.rootfs.size: must be above 0",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ workspace: { size: "0" } }),
    message: "spec.workspace.size: must be above 0",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ workspace: { size: "65Ti" } }),
    message: "spec.workspace.size: must be at most 64Ti",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ resources: { requests: { "bad key!": "1" } } }),
    message:
      'spec.resources.requests["bad key!"]: must be a resource name such as cpu, memory or example.com/gpu',
  },
  {
    kind: "PodTemplate",
    spec: tpl({ resources: { requests: { cpu: "-1" } } }),
    message: "spec.resources.requests.cpu: must not be negative",
  },
  // Stored before, and no Pod could ever run from them.
  {
    kind: "PodTemplate",
    spec: tpl({ image: `ghcr.io/x/${"a".repeat(300 * 1024)}` }),
    message: "spec.image: must be at most 1024 characters",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ resources: { limits: { memory: "1e1000" } } }),
    message: "spec.resources.limits.memory: must be at most 8Pi",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ resources: { requests: { cpu: "9".repeat(200) } } }),
    message: "spec.resources.requests.cpu: must be at most 64 characters",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ rootfs: { size: "1".repeat(200) } }),
    message: "spec.rootfs.size: must be at most 64 characters",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ resources: { limits: { memory: "0" } } }),
    message:
      "spec.resources.limits.memory: must be at least 6Mi: no container starts with less (got 0)",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ runtimeClassName: "a..b" }),
    message:
      "spec.runtimeClassName: must be a RuntimeClass name, or empty for the cluster's default runtime",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ runtimeClassName: "a".repeat(300) }),
    message: "spec.runtimeClassName: must be at most 253 characters",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ security: { seccompProfile: "Localhost" } }),
    message:
      'spec.security.seccompProfile: must be one of "RuntimeDefault", "Unconfined" (got "Localhost")',
  },
  {
    kind: "PodTemplate",
    spec: tpl({ rootfs: { paths: ["usr/local"] } }),
    message: "spec.rootfs.paths[0]: must be one top-level directory name such as usr",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ rootfs: { paths: ["usr", "proc"] } }),
    message:
      "spec.rootfs.paths[1]: must not be dev, proc, sys, workspace: the runtime and CubePod mount those",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ rootfs: { paths: [".cubepod"] } }),
    message:
      "spec.rootfs.paths[0]: must not start with .cubepod: CubePod keeps its own files on the volume there",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ rootfs: { paths: [".."] } }),
    message: "spec.rootfs.paths[0]: must be one top-level directory name",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ rootfs: { paths: ["etc", "etc"] } }),
    message: "spec.rootfs.paths: must not name a directory twice",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ rootfs: { paths: [] } }),
    message: "spec.rootfs.paths: must name at least one directory",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ env: [{ name: "A".repeat(10 * 1024), value: "x" }] }),
    message: "spec.env[0].name: must be at most 1024 characters",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ mtls: { enabled: true } }),
    message: MTLS_REMOVED,
  },
  {
    kind: "PodTemplate",
    spec: tpl({
      resources: { requests: { cpu: "2", memory: "1Gi" }, limits: { cpu: "1500m", memory: "2Gi" } },
    }),
    message: "spec.resources.requests.cpu: must not exceed spec.resources.limits.cpu (2 > 1500m)",
  },
  { kind: "PodTemplate", spec: tpl({ envdPort: 0 }), message: "spec.envdPort: must be >= 1" },
  {
    kind: "PodTemplate",
    spec: tpl({ envdPort: 70000 }),
    message: "spec.envdPort: must be <= 65535",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ envdPort: 8080.5 }),
    message: "spec.envdPort: must be a whole number (got 8080.5)",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ env: [{ value: "x" }] }),
    message: "spec.env[0].name: is required",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ env: [{ name: "OK" }, { name: "1BAD" }] }),
    message: "spec.env[1].name: must be a valid environment variable name",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ resources: { limits: { memory: "lots" } } }),
    message: `spec.resources.limits.memory: ${QUANTITY}`,
  },
  {
    kind: "PodTemplate",
    spec: tpl({ network: { egress: "Some" } }),
    message: 'spec.network.egress: must be one of "Internet", "None" (got "Some")',
  },
  {
    kind: "PodTemplate",
    spec: tpl({ network: { egressCIDRs: ["203.0.113.0/33"] } }),
    message: "spec.network.egressCIDRs[0]: must be a CIDR such as 203.0.113.0/24",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ user: "Root User" }),
    message: "spec.user: must be a POSIX user name such as user",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ network: { egressCIDRs: ["example.com/24"] } }),
    message: "spec.network.egressCIDRs[0]: must be a CIDR such as 203.0.113.0/24",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ egress: { enabled: true, image: "proxy:1", port: 0 } }),
    message: "spec.egress.port: must be >= 1",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ egress: { enabled: true, image: "proxy:1", allowHosts: [""] } }),
    message: "spec.egress.allowHosts[0]: must not be empty",
  },
  {
    kind: "PodTemplate",
    spec: tpl({ egress: { enabled: "yes" } }),
    message: 'spec.egress.enabled: must be a boolean (got "yes")',
  },
  {
    kind: "PodTemplate",
    spec: tpl({ forkStrategy: "Snapshot" }),
    message: 'spec.forkStrategy: must be one of "Clone", "Copy" (got "Snapshot")',
  },
  // PodWarmPool
  { kind: "PodWarmPool", spec: {}, message: "spec.templateRef: is required" },
  { kind: "PodWarmPool", spec: pool({ replicas: -1 }), message: "spec.replicas: must be >= 0" },
  {
    kind: "PodWarmPool",
    spec: pool({ replicas: 3_000_000 }),
    message: "spec.replicas: must be <= 1000",
  },
  {
    kind: "PodWarmPool",
    spec: pool({ replicas: 1.5 }),
    message: "spec.replicas: must be a whole number (got 1.5)",
  },
  {
    kind: "PodWarmPool",
    spec: pool({ replicas: "3" }),
    message: 'spec.replicas: must be a number (got "3")',
  },
  {
    kind: "PodWarmPool",
    spec: pool({ templateRef: "other-ns/python" }),
    message: `spec.templateRef: ${SAME_NS("PodTemplate")}`,
  },
  // PodBox: schema
  {
    kind: "PodBox",
    spec: {},
    message: "spec.templateRef: is required unless spec.warmPoolRef is set",
  },
  {
    kind: "PodBox",
    spec: box({ desiredState: "Stopped" }),
    message: 'spec.desiredState: must be one of "Running", "Paused", "Terminated" (got "Stopped")',
  },
  {
    kind: "PodBox",
    spec: box({ rootfsGeneration: 0 }),
    message: "spec.rootfsGeneration: must be >= 1",
  },
  {
    kind: "PodBox",
    spec: box({ idleTimeoutSeconds: -5 }),
    message: "spec.idleTimeoutSeconds: must be >= 0",
  },
  {
    kind: "PodBox",
    spec: box({ leaseExpiresAt: "tomorrow" }),
    message: "spec.leaseExpiresAt: must be an RFC 3339 timestamp such as 2026-12-01T10:00:00Z",
  },
  {
    kind: "PodBox",
    spec: box({ volumeReclaimPolicy: "Keep" }),
    message: 'spec.volumeReclaimPolicy: must be one of "Delete", "Retain" (got "Keep")',
  },
  {
    kind: "PodBox",
    spec: box({ volumeKey: "Has_Caps" }),
    message: "spec.volumeKey: must be a lowercase RFC 1123 label (a-z, 0-9, '-')",
  },
  {
    kind: "PodBox",
    spec: box({ forkFrom: "other-ns/parent" }),
    message: `spec.forkFrom: ${SAME_NS("PodBox")}`,
  },
  {
    kind: "PodBox",
    spec: box({ templateRef: "ns/python" }),
    message: `spec.templateRef: ${SAME_NS("PodTemplate")}`,
  },
  // PodBox: rules across fields
  {
    kind: "PodBox",
    spec: box({ warmPoolRef: "pool", forkFrom: "parent" }),
    message:
      "spec.forkFrom: cannot be combined with spec.warmPoolRef (a fork clones its parent and never claims a warm standby)",
  },
  {
    kind: "PodBox",
    spec: box({ warmPoolRef: "pool", volumeKey: "kept" }),
    message:
      "spec.volumeKey: cannot be combined with spec.warmPoolRef (re-attached volumes never come from a warm standby)",
  },
  {
    kind: "PodBox",
    spec: box({ forkFrom: "parent", volumeKey: "kept" }),
    message:
      "spec.forkFrom: cannot be combined with spec.volumeKey (a box either clones a parent or re-attaches kept volumes)",
  },
  {
    kind: "PodBox",
    spec: box({ forkFrom: "me" }),
    ctx: { name: "me" },
    message: "spec.forkFrom: may not name the box itself",
  },
  {
    kind: "PodBox",
    spec: box({}),
    ctx: { name: "x".repeat(64) },
    message:
      "metadata.name: must be a lowercase RFC 1123 label of at most 63 characters (it becomes a label value)",
  },
  {
    kind: "PodBox",
    spec: box({ warmPoolRef: "pool" }),
    ctx: { poolTemplateRef: "node" },
    message:
      'spec.warmPoolRef: PodWarmPool "pool" uses PodTemplate "node", not spec.templateRef "python"',
  },
  // PodBox: updates
  {
    kind: "PodBox",
    spec: box({ templateRef: "node" }),
    ctx: was(box({})),
    message: 'spec.templateRef: is immutable (was "python", got "node")',
  },
  {
    kind: "PodBox",
    spec: box({ warmPoolRef: "pool" }),
    ctx: was(box({})),
    message: 'spec.warmPoolRef: is immutable (was unset, got "pool")',
  },
  {
    kind: "PodBox",
    spec: box({}),
    ctx: was(box({ forkFrom: "parent" })),
    message: 'spec.forkFrom: is immutable (was "parent", got unset)',
  },
  {
    kind: "PodBox",
    spec: box({ volumeKey: "b" }),
    ctx: was(box({ volumeKey: "a" })),
    message: 'spec.volumeKey: is immutable (was "a", got "b")',
  },
  {
    kind: "PodBox",
    spec: box({ rootfsGeneration: 2 }),
    ctx: was(box({ rootfsGeneration: 3 })),
    message: "spec.rootfsGeneration: may not decrease (was 3, got 2)",
  },
];

function validate(c: Case) {
  if (c.kind === "PodTemplate") return validatePodTemplate(c.spec);
  if (c.kind === "PodWarmPool") return validatePodWarmPool(c.spec);
  return validatePodBox(c.spec, { name: "box", ...c.ctx });
}

describe("admission rules", () => {
  it("has at least 30 invalid cases", () => {
    expect(INVALID.length).toBeGreaterThanOrEqual(30);
  });

  it.each(INVALID.map(c => [c.message, c] as const))("denies: %s", (_, c) => {
    expect(validate(c)).toEqual({ ok: false, errors: [c.message] });
  });

  it("reports every broken rule at once", () => {
    const v = validatePodBox(box({ warmPoolRef: "pool", forkFrom: "box", volumeKey: "k" }), {
      name: "box",
    });
    expect(v.ok).toBe(false);
    expect(!v.ok && v.errors).toHaveLength(4);
  });

  it("fills the defaults a stored object gets", () => {
    expect(validatePodTemplate({ image: "img" })).toEqual({
      ok: true,
      spec: {
        image: "img",
        runtimeClassName: "kata-qemu",
        volumeMode: "Block",
        rootfs: { size: "10Gi", paths: ["etc", "home", "opt", "root", "srv", "tmp", "usr", "var"] },
        workspace: { size: "20Gi" },
        poddInjectorImage: DEFAULT_PODD_INJECTOR_IMAGE,
        envdPort: 49983,
        user: "user",
        forkStrategy: "Clone",
        network: { egress: "Internet" },
        security: { allowPrivilegeEscalation: false, seccompProfile: "RuntimeDefault" },
      },
    });
    expect(validatePodBox({ warmPoolRef: "pool" }, { name: "b" })).toEqual({
      ok: true,
      spec: {
        warmPoolRef: "pool",
        desiredState: "Running",
        rootfsGeneration: 1,
        volumeReclaimPolicy: "Delete",
      },
    });
  });

  it("accepts what updates may change", () => {
    const old = box({ rootfsGeneration: 2, idleTimeoutSeconds: 60 });
    const next = box({
      rootfsGeneration: 3,
      desiredState: "Paused",
      idleTimeoutSeconds: 0,
      leaseExpiresAt: "2026-12-01T10:00:00+01:00",
      volumeReclaimPolicy: "Retain",
    });
    expect(validatePodBox(next, { name: "b", oldSpec: old }).ok).toBe(true);
    expect(validatePodBox(old, { name: "b", oldSpec: old }).ok).toBe(true);
  });

  it("accepts a pool whose template is the box's, and a pool not created yet", () => {
    const spec = box({ warmPoolRef: "pool" });
    expect(validatePodBox(spec, { name: "b", poolTemplateRef: "python" }).ok).toBe(true);
    expect(validatePodBox(spec, { name: "b" }).ok).toBe(true);
  });

  it("accepts an empty runtimeClassName (the cluster default)", () => {
    expect(validatePodTemplate(tpl({ runtimeClassName: "" })).ok).toBe(true);
  });
});

describe("a removed field is refused by name, not dropped", () => {
  it.each([
    ["enabled", { enabled: true }],
    ["disabled", { enabled: false }],
    ["empty", {}],
    ["null", null],
  ])("spec.mtls, %s", (_, mtls) => {
    expect(validatePodTemplate(tpl({ mtls }))).toEqual({ ok: false, errors: [MTLS_REMOVED] });
  });

  it("with the schema's own errors beside it", () => {
    expect(validatePodTemplate({ mtls: { enabled: true } })).toEqual({
      ok: false,
      errors: [MTLS_REMOVED, "spec.image: is required"],
    });
  });
});

describe("Block mode needs a VM runtime", () => {
  const spec = (o: object) => {
    const v = validatePodTemplate(tpl({ volumeMode: "Block", ...o }));
    if (!v.ok) throw new Error(v.errors.join("; "));
    return v.spec;
  };
  it("accepts Block under a VM runtime class, and Filesystem under any", () => {
    expect(
      blockModeRule(spec({ runtimeClassName: "kata-qemu" }), DEFAULT_VM_RUNTIME_CLASSES),
    ).toEqual([]);
    expect(blockModeRule(spec({ runtimeClassName: "vm-standin" }), ["vm-standin"])).toEqual([]);
    expect(
      blockModeRule(spec({ volumeMode: "Filesystem", runtimeClassName: "gvisor" }), ["kata"]),
    ).toEqual([]);
  });
  it("refuses Block under another runtime, or the default one, naming the field", () => {
    expect(blockModeRule(spec({ runtimeClassName: "gvisor" }), ["kata", "kata-qemu"])).toEqual([
      'spec.volumeMode: Block needs a VM runtime, one of the RuntimeClasses kata, kata-qemu (the module\'s CUBEPOD_VM_RUNTIME_CLASSES), as the sandbox formats and mounts its devices in its own kernel; runtimeClassName "gvisor" is not one: use Filesystem, or one of those',
    ]);
    expect(blockModeRule(spec({ runtimeClassName: "" }), ["kata"])[0]).toMatch(
      /no runtimeClassName is the cluster's default runtime, not one/,
    );
  });
});

describe("egress rules", () => {
  const errors = (network: object) => {
    const v = validatePodTemplate(tpl({ network }));
    return v.ok ? [] : v.errors;
  };
  it("are checked as E2B's API checks them", () => {
    expect(errors({ allowOut: ["*.a.test", "198.19.0.10"], denyOut: ["0.0.0.0/0"] })).toEqual([]);
    expect(errors({ denyOut: ["198.19.0.0/24", "8.8.8.8"] })).toEqual([]);
    expect(errors({ allowOut: ["a.test"] }).join()).toContain("you must include 'ALL_TRAFFIC'");
    expect(errors({ denyOut: ["a.test"] }).join()).toContain("must be an IPv4 address or CIDR");
    expect(errors({ allowOut: ["::1"] }).join()).toContain("only IPv4");
    expect(errors({ allowOut: ["0.0.0.0"] }).join()).toContain("an unspecified address");
    expect(errors({ allowOut: ["a..test"], denyOut: ["0.0.0.0/0"] }).join()).toContain(
      "must be an IPv4 address, a CIDR or a domain",
    );
  });
  it("need the node egress agent", () => {
    const v = validatePodTemplate(tpl({ network: { denyOut: ["8.8.8.8"] } }));
    if (!v.ok) throw new Error(v.errors.join("; "));
    expect(egressAgentRule(v.spec, true)).toEqual([]);
    expect(egressAgentRule(v.spec, false)).toEqual([
      "spec.network: denyOut need the node egress agent, which this cluster does not run (the module's CUBEPOD_EGRESS_AGENT_ADDRESSES is unset; docs/network.md)",
    ]);
  });
});

describe("the egress sidecar under gVisor", () => {
  const spec = (o: object) => {
    const v = validatePodTemplate(tpl(o));
    if (!v.ok) throw new Error(v.errors.join("; "));
    return v.spec;
  };
  it("is refused, pointing at the node egress agent's rules", () => {
    const sidecar = { egress: { enabled: true } };
    expect(
      sidecarRuntimeRule(spec({ ...sidecar, runtimeClassName: "gvisor" }), ["gvisor"]),
    ).toEqual([
      'spec.egress: the egress sidecar isolates the Pod with netfilter rules, which gVisor (runtimeClassName "gvisor") does not serve; use spec.network.allowOut and denyOut, enforced by the node egress agent outside the sandbox, or a runtime other than gVisor',
    ]);
    expect(sidecarRuntimeRule(spec({ ...sidecar, runtimeClassName: "" }), ["gvisor"])).toEqual([]);
    expect(sidecarRuntimeRule(spec({ runtimeClassName: "gvisor" }), ["gvisor"])).toEqual([]);
  });
});

describe("samples", () => {
  const dir = join(__dirname, "..", "..", "..", "samples");
  const docs = ["podtemplate.yaml", "podwarmpool.yaml", "podbox.yaml"].flatMap(f =>
    parseAllDocuments(readFileSync(join(dir, f), "utf8")).map(d => d.toJS()),
  );

  it.each(docs.map(d => [`${d.kind} ${d.metadata.name}`, d] as const))("%s is valid", (_, d) => {
    const v =
      d.kind === "PodTemplate"
        ? validatePodTemplate(d.spec)
        : d.kind === "PodWarmPool"
          ? validatePodWarmPool(d.spec)
          : validatePodBox(d.spec, { name: d.metadata.name });
    expect(v).toMatchObject({ ok: true });
  });
});

describe("names whose derived names must stay valid", () => {
  it("a template name becomes a label value: at most 63 characters", () => {
    expect(nameRule("PodTemplate", "t".repeat(63))).toEqual([]);
    expect(nameRule("PodTemplate", "t".repeat(64))).toEqual([
      "metadata.name: must be at most 63 characters (it becomes the label value pod.cubeplex.ai/template on its Pods); got 64",
    ]);
  });

  it("a pool's standbys are <pool>-<6 characters>: at most 56", () => {
    expect(nameRule("PodWarmPool", "p".repeat(56))).toEqual([]);
    expect(nameRule("PodWarmPool", "p".repeat(57))[0]).toMatch(
      /^metadata.name: must be at most 56 characters .*; got 57$/,
    );
  });
});
