import { createHash } from "node:crypto";
import { SHA256_HEX, type PodAPIKeySpec } from "../capabilities/api/podapikey";

export type PodAPIKey = { metadata?: { namespace?: string; name?: string }; spec?: PodAPIKeySpec };

export const sha256Hex = (s: string) => createHash("sha256").update(s).digest("hex");

/**
 * Which namespace each API key acts in, fed by the watch on PodAPIKeys. The key itself is stored
 * nowhere: a request's key is hashed and looked up. A hash found in two namespaces acts in
 * neither: a key must name one tenant.
 */
export class KeyIndex {
  /** hash -> the PodAPIKeys ("ns/name") that carry it */
  readonly #owners = new Map<string, Set<string>>();
  /** "ns/name" -> its hash */
  readonly #hashOf = new Map<string, string>();

  observe(apiKey: PodAPIKey, deleted: boolean): void {
    const id = `${apiKey.metadata?.namespace}/${apiKey.metadata?.name}`;
    const old = this.#hashOf.get(id);
    if (old) {
      this.#owners.get(old)?.delete(id);
      if (this.#owners.get(old)?.size === 0) this.#owners.delete(old);
      this.#hashOf.delete(id);
    }
    // The CRD's schema admits only 64 lowercase hex digits; anything else is not a key.
    const hash = apiKey.spec?.sha256;
    if (deleted || !hash || !SHA256_HEX.test(hash)) return;
    this.#hashOf.set(id, hash);
    this.#owners.set(hash, (this.#owners.get(hash) ?? new Set()).add(id));
  }

  /** The namespace a key acts in, if it is known (and names only one). */
  namespaceOf(key: string): string | undefined {
    const owners = this.#owners.get(sha256Hex(key));
    const namespaces = new Set([...(owners ?? [])].map(o => o.split("/")[0]));
    return namespaces.size === 1 ? [...namespaces][0] : undefined;
  }
}
