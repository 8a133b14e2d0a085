import type { CubePodTemplate } from "../api/kinds";
import { podTemplateSpecSchema } from "../api/podtemplate";
import type { ApiClient } from "../client/api-client";
import { paths } from "../client/paths";
import type { NetworkConfig } from "../config";
import { describeError, isNamespaceTerminating, statusOf } from "../kit/api-errors";
import { kubeTime } from "../kit/conditions";
import { objectKey } from "../kit/object-key";
import { writeStatusAt } from "../kit/status-patch";
import type { WorkQueue } from "../kit/work-queue";
import { WriteEchoes } from "../kit/write-echoes";
import { LABEL_TEMPLATE } from "../manifests/labels";
import {
  egressPolicy,
  egressPolicyName,
  ISOLATION_CONDITION,
  type IsolationOutcome,
  isolationCondition,
  SANDBOX_POLICY,
  sandboxPolicy,
} from "./decide";

export type NetworkReconcilerDeps = {
  client: ApiClient;
  queue: WorkQueue;
  clock: () => Date;
  network: NetworkConfig;
};

/**
 * Keeps each template's NetworkPolicies (decide.ts) as its spec says, and its `NetworkIsolated`
 * condition: on every template event, and when someone changes or deletes a policy CubePod owns.
 */
export class NetworkReconciler {
  /** Template versions this reconciler wrote (their status): their events need no reconcile. */
  readonly #writes = new WriteEchoes();
  /** Namespaces whose sandbox policy this process has applied: the webhook's fast path. */
  readonly #applied = new Set<string>();

  constructor(private readonly deps: NetworkReconcilerDeps) {}

  /** True when the template event is the echo of this reconciler's status write. */
  isEcho(tpl: CubePodTemplate): boolean {
    const key = objectKey(tpl.metadata!.namespace!, tpl.metadata!.name!);
    return this.#writes.isEcho(key, tpl.metadata?.resourceVersion);
  }

  /** A template appeared or changed: its policies follow. */
  reconcileSoon(namespace: string, template: string): void {
    this.deps.queue.add(objectKey(namespace, template));
  }

  /**
   * A policy CubePod owns changed or went (someone edited or deleted it): it is applied again by
   * the template it belongs to, or, a namespace's sandbox policy, on its own (the key with no
   * template). An apply that changes nothing writes nothing, so its own echo ends there.
   */
  onPolicyEvent(namespace: string, name: string, templateLabel?: string): void {
    if (templateLabel) return this.reconcileSoon(namespace, templateLabel);
    if (name !== SANDBOX_POLICY) return;
    // Gone or changed (a namespace deleted and made again, too): the next sandbox Pod admitted
    // there applies it again rather than trust this process's memory.
    this.#applied.delete(namespace);
    this.deps.queue.add(objectKey(namespace, ""));
  }

  /**
   * Makes sure the namespace's sandbox policy exists before a sandbox Pod is admitted there, so
   * that no sandbox runs open while its template's reconcile is still to come. One write per
   * namespace and process.
   */
  async ensureNamespace(namespace: string): Promise<void> {
    if (this.#applied.has(namespace)) return;
    await this.#applySandboxPolicy(namespace);
  }

  async #applySandboxPolicy(namespace: string): Promise<void> {
    await this.deps.client.apply(
      paths.networkPolicies(namespace, SANDBOX_POLICY),
      sandboxPolicy(namespace, this.deps.network),
      { force: true },
    );
    this.#applied.add(namespace);
  }

  /**
   * One reconcile of a template's policies and condition, or (the key with no template) of a
   * namespace's sandbox policy. A namespace being deleted, or gone, ends it: its policies go with
   * it.
   */
  async reconcile(key: string): Promise<void> {
    try {
      await this.#reconcile(key);
    } catch (e) {
      if (isNamespaceTerminating(e) || statusOf(e) === 404) return this.#writes.forget(key);
      throw e;
    }
  }

  async #reconcile(key: string): Promise<void> {
    const { client, network } = this.deps;
    const [namespace, name] = key.split("/");
    if (name === "") return this.#applySandboxPolicy(namespace);
    const tpl = await client.get<CubePodTemplate>(paths.podTemplates(namespace, name));
    if (!tpl || tpl.metadata?.deletionTimestamp) return this.#writes.forget(key);
    const parsed = podTemplateSpecSchema.safeParse(tpl.spec ?? {});
    let outcome: IsolationOutcome = { applied: true };
    let failure: unknown;
    try {
      if (!parsed.success) throw new Error("the template's spec is invalid");
      await this.#applySandboxPolicy(namespace);
      const egress = egressPolicy(
        { namespace, name, uid: tpl.metadata!.uid!, spec: parsed.data },
        network,
      );
      const egressPath = paths.networkPolicies(namespace, egressPolicyName(name));
      if (egress) await client.apply(egressPath, egress, { force: true });
      else await client.delete(egressPath).catch(e => ignore404(e));
    } catch (e) {
      if (isNamespaceTerminating(e)) throw e;
      outcome = { applied: false, error: describeError(e) };
      failure = e;
    }
    const before = tpl.status ?? {};
    const generation = tpl.metadata?.generation ?? 0;
    const isolated = isolationCondition(
      before.conditions,
      outcome,
      parsed.success ? parsed.data : { network: { egress: "None" } },
      network,
      generation,
      kubeTime(this.deps.clock()),
    );
    const status = {
      ...before,
      observedGeneration: generation,
      conditions: [
        isolated,
        ...(before.conditions ?? []).filter(c => c.type !== ISOLATION_CONDITION),
      ],
    };
    await this.#writes.during(key, () =>
      writeStatusAt(client, paths.podTemplates(namespace, name), before, status),
    );
    // Retried with backoff by the queue, once the condition says why.
    if (failure) throw failure;
  }
}

function ignore404(e: unknown): void {
  if (statusOf(e) !== 404) throw e;
}

/** The template a CubePod policy belongs to, from its label (none for a sandbox policy). */
export const templateOfPolicy = (labels?: Record<string, string>) => labels?.[LABEL_TEMPLATE];
