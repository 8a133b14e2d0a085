import { createHash } from "node:crypto";
import { GROUP } from "../capabilities/api/common";

/** The Secret type of an API key: `data.sha256` is the lowercase hex SHA-256 of the key. */
export const API_KEY_SECRET_TYPE = `${GROUP}/api-key`;

type Secret = {
  type?: string;
  metadata?: { namespace?: string; name?: string };
  data?: Record<string, string>;
};

export const sha256Hex = (s: string) => createHash("sha256").update(s).digest("hex");

/**
 * Which namespace each API key acts in, fed by the watch on API-key Secrets. The key itself is
 * stored nowhere: a request's key is hashed and looked up. A hash found in two namespaces acts in
 * neither: a key must name one tenant.
 */
export class KeyIndex {
  /** hash -> the Secrets ("ns/name") that carry it */
  readonly #owners = new Map<string, Set<string>>();
  /** "ns/name" -> its hash */
  readonly #hashOf = new Map<string, string>();

  observe(secret: Secret, deleted: boolean): void {
    const id = `${secret.metadata?.namespace}/${secret.metadata?.name}`;
    const old = this.#hashOf.get(id);
    if (old) {
      this.#owners.get(old)?.delete(id);
      if (this.#owners.get(old)?.size === 0) this.#owners.delete(old);
      this.#hashOf.delete(id);
    }
    const encoded = secret.data?.sha256;
    if (deleted || secret.type !== API_KEY_SECRET_TYPE || !encoded) return;
    const hash = Buffer.from(encoded, "base64").toString("utf8").trim().toLowerCase();
    if (!/^[0-9a-f]{64}$/.test(hash)) return;
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
