import type { PodBoxStatus } from "../../../capabilities/api/podbox";
import { decideBox } from "../../../capabilities/box/decide";
import type { BoxObservation, ObservedPod } from "../../../capabilities/box/types";
import {
  ANNOTATION_EGRESS,
  EGRESS_CONDITION,
  egressDigest,
} from "../../../capabilities/network/egress-agent";
import { buildStandby } from "../../../capabilities/manifests/standby";
import { claimedEgress, claimedStatus } from "../../../capabilities/claim/decide";
import type { Standby } from "../../../capabilities/claim/standby-index";
import type { PodBox } from "../../../capabilities/api/kinds";
import { OWNER, template } from "../fixtures";
import { obs as observation, pod, VOLUMES } from "./observation";

const ALLOW_LIST = { allowOut: ["a.internet.test"], denyOut: ["0.0.0.0/0"] };
const ALLOW_LIST_JSON = JSON.stringify(ALLOW_LIST);
const TEMPLATE_RULES = { denyOut: ["198.19.0.11"] };

/** A box on its volumes, its template with the rules given, the node egress agent running. */
const obs = (over: {
  spec?: Record<string, unknown>;
  pods?: ObservedPod[];
  templateNetwork?: Record<string, unknown>;
  egressAgent?: boolean;
}): BoxObservation =>
  observation({
    spec: over.spec,
    pods: over.pods,
    pvcs: VOLUMES,
    template: template(over.templateNetwork ? { network: over.templateNetwork } : {}),
    egressAgent: over.egressAgent ?? true,
  });

const egressCondition = (status: PodBoxStatus) =>
  status.conditions?.find(c => c.type === EGRESS_CONDITION);

describe("a box's egress rules, for the node egress agent", () => {
  it("are written on its new Pod, its own replacing its template's", () => {
    const created = (o: BoxObservation) => {
      const a = decideBox(o).actions.find(a => a.type === "createPod");
      return a?.type === "createPod" ? a.pod.metadata?.annotations?.[ANNOTATION_EGRESS] : "none";
    };
    expect(created(obs({ spec: { network: ALLOW_LIST } }))).toBe(ALLOW_LIST_JSON);
    expect(created(obs({ templateNetwork: TEMPLATE_RULES }))).toBe(JSON.stringify(TEMPLATE_RULES));
    expect(created(obs({ spec: { network: ALLOW_LIST }, templateNetwork: TEMPLATE_RULES }))).toBe(
      ALLOW_LIST_JSON,
    );
    // Empty lists of its own: no rules, yet still the box's, so its Pod is policed to allow all.
    expect(
      created(
        obs({ spec: { network: { allowOut: [], denyOut: [] } }, templateNetwork: TEMPLATE_RULES }),
      ),
    ).toBe("{}");
    expect(created(obs({}))).toBeUndefined();
    // egress: None reaches nothing by its NetworkPolicy: no rules to enforce.
    expect(created(obs({ spec: { egress: "None", network: ALLOW_LIST } }))).toBeUndefined();
  });

  it("reach a running Pod that lacks them (a claimed standby, a PUT /network)", () => {
    const plan = decideBox(obs({ spec: { network: ALLOW_LIST }, pods: [pod()] }));
    expect(plan.actions).toEqual([{ type: "setPodEgress", name: "box", value: ALLOW_LIST_JSON }]);
    // The box keeps running meanwhile: its condition says the rules are not enforced yet.
    expect(plan.status.phase).toBe("Running");
    expect(egressCondition(plan.status)).toMatchObject({ status: "False", reason: "Updating" });
    // Rules removed: so are the Pod's.
    const cleared = decideBox(obs({ pods: [pod({ egress: ALLOW_LIST_JSON })] }));
    expect(cleared.actions).toEqual([{ type: "setPodEgress", name: "box", value: null }]);
    expect(egressCondition(cleared.status)).toBeUndefined();
  });

  it("report whether the node enforces them, for this generation", () => {
    const on = (p: Partial<ObservedPod>) =>
      decideBox(
        obs({ spec: { network: ALLOW_LIST }, pods: [pod({ egress: ALLOW_LIST_JSON, ...p })] }),
      );
    const waiting = on({});
    expect(waiting.actions).toEqual([]);
    expect(egressCondition(waiting.status)).toMatchObject({
      status: "False",
      reason: "WaitingForAgent",
      observedGeneration: 4,
    });
    expect(
      egressCondition(on({ egressApplied: egressDigest(ALLOW_LIST_JSON) }).status),
    ).toMatchObject({
      status: "True",
      reason: "Enforced",
      observedGeneration: 4,
    });
    // An answer for other rules is no answer for these.
    expect(egressCondition(on({ egressApplied: egressDigest("{}") }).status)).toMatchObject({
      status: "False",
      reason: "WaitingForAgent",
    });
    expect(egressCondition(on({ egressApplied: "invalid: bad rule" }).status)).toMatchObject({
      status: "False",
      reason: "RefusedByAgent",
      message: expect.stringContaining("bad rule; the sandbox reaches nothing"),
    });
  });

  it("keep a box from starting where no agent could enforce them", () => {
    const plan = decideBox(obs({ spec: { network: ALLOW_LIST }, egressAgent: false }));
    expect(plan.actions.some(a => a.type === "createPod")).toBe(false);
    expect(plan.status).toMatchObject({ phase: "Pending", reason: "EgressNotEnforced" });
    expect(plan.status.message).toContain("CUBEPOD_EGRESS_AGENT_ADDRESSES");
    // A template's rules likewise; none at all starts as ever.
    expect(
      decideBox(obs({ templateNetwork: TEMPLATE_RULES, egressAgent: false })).status.reason,
    ).toBe("EgressNotEnforced");
    expect(decideBox(obs({ egressAgent: false })).actions.some(a => a.type === "createPod")).toBe(
      true,
    );
  });

  it("of its template are on a standby already, so that a claim finds them enforced", () => {
    const standby = (network?: Record<string, unknown>) =>
      buildStandby({
        namespace: "ns",
        pool: "p",
        name: "p-x",
        template: template(network ? { network } : {}),
        templateHash: "h",
        owner: OWNER,
      }).pod.metadata?.annotations?.[ANNOTATION_EGRESS];
    expect(standby(TEMPLATE_RULES)).toBe(JSON.stringify(TEMPLATE_RULES));
    expect(standby()).toBeUndefined();
  });

  it("of a warm claim are reported by the claim itself, and differ from the standby's only by its own", () => {
    const templateEgress = JSON.stringify(TEMPLATE_RULES);
    const pool = { name: "python", envdPort: 49983, egress: templateEgress };
    const standby: Standby = {
      namespace: "ns",
      pool: "p",
      name: "p-x",
      resourceVersion: "7",
      uid: "u",
      podIP: "198.18.0.9",
      rootfsPVCName: "p-x-rootfs-g1",
      workspacePVCName: "p-x-workspace",
      egress: templateEgress,
      egressApplied: egressDigest(templateEgress),
    };
    const box = (spec: object) =>
      ({ metadata: { name: "b", generation: 1 }, spec: { warmPoolRef: "p", ...spec } }) as PodBox;
    const conditionOf = (b: PodBox) =>
      claimedStatus(b, standby, pool, "2026-12-07T10:00:00Z").conditions?.find(
        c => c.type === EGRESS_CONDITION,
      );
    expect(claimedEgress(box({}), pool)).toBe(templateEgress);
    expect(conditionOf(box({}))).toMatchObject({ status: "True", reason: "Enforced" });
    const own = box({ network: ALLOW_LIST });
    expect(claimedEgress(own, pool)).toBe(ALLOW_LIST_JSON);
    expect(conditionOf(own)).toMatchObject({ status: "False", reason: "Updating" });
    expect(claimedEgress(box({}), { name: "python", envdPort: 49983 })).toBeUndefined();
    expect(conditionOf(box({}))).toBeDefined();
    expect(
      claimedStatus(box({}), standby, { name: "python", envdPort: 1 }, "2026-12-07T10:00:00Z")
        .conditions,
    ).toHaveLength(1);
  });
});
