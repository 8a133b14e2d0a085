import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from "node:crypto";
import { GROUP } from "../capabilities/api/common";
import type { PodBox } from "../capabilities/api/kinds";
import { accessToken, servesPublicTraffic, trafficAccessToken } from "./e2b";
import { PoddControl } from "./podd-control";

/**
 * Which token key a box's daemon was given its access token under (`TokenKey.id`): after a
 * rotation, a sandbox started before it keeps its token until its next start.
 */
export const ANNOTATION_TOKEN_KEY = `${GROUP}/sandbox-token-key`;
/** A create's envVars, sealed, for the daemon of every resume and fork (sealed envVars). */
export const ANNOTATION_ENV_VARS = `${GROUP}/sandbox-env-vars`;
/** The most a box's sealed envVars may take: annotations share 256 KiB per object. */
export const MAX_SEALED_ENV_VARS = 128 * 1024;
const SEALED_VERSION = "v1";

/**
 * One token key of the gateway: the secret every replica shares, and what is derived from it:
 * sandboxes' access tokens (HMAC), the Ed25519 key of podd's credentials, and the AES key that
 * seals envVars into a box's annotations, where only the gateway can read them back.
 */
export class TokenKey {
  /** Names the key without telling anything of it. */
  readonly id: string;
  readonly control: PoddControl;
  readonly #sealing: Buffer;

  constructor(readonly secret: string) {
    this.id = createHash("sha256")
      .update(`cubepod token key id\0${secret}`)
      .digest("hex")
      .slice(0, 16);
    this.control = new PoddControl(secret);
    this.#sealing = Buffer.from(hkdfSync("sha256", secret, "", "cubepod sealed env vars", 32));
  }

  /** `v1.<key id>.<iv>.<ciphertext and tag>`: AES-256-GCM, bound to the box's namespace/name. */
  seal(plaintext: string, boxRef: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.#sealing, iv).setAAD(Buffer.from(boxRef));
    const sealed = Buffer.concat([
      cipher.update(plaintext, "utf8"),
      cipher.final(),
      cipher.getAuthTag(),
    ]);
    return [SEALED_VERSION, this.id, iv.toString("base64url"), sealed.toString("base64url")].join(
      ".",
    );
  }

  /** The plaintext, or undefined when this key did not seal it for that box. */
  open(sealed: string, boxRef: string): string | undefined {
    const [version, id, iv, data] = sealed.split(".");
    if (version !== SEALED_VERSION || id !== this.id || !iv || !data) return undefined;
    try {
      const raw = Buffer.from(data, "base64url");
      const decipher = createDecipheriv("aes-256-gcm", this.#sealing, Buffer.from(iv, "base64url"))
        .setAAD(Buffer.from(boxRef))
        .setAuthTag(raw.subarray(-16));
      return Buffer.concat([decipher.update(raw.subarray(0, -16)), decipher.final()]).toString(
        "utf8",
      );
    } catch {
      return undefined;
    }
  }
}

/**
 * The gateway's token keys: the current one, which everything new is made with, and the one it
 * replaced, kept through a rotation (docs/deploy.md) so that sandboxes running across it go on
 * serving: their daemons trust the control key of the Pod's start, and hold the access token of
 * their last /init.
 */
export class TokenKeys {
  readonly current: TokenKey;
  readonly previous?: TokenKey;

  constructor(current: string, previous?: string) {
    this.current = new TokenKey(current);
    if (previous && previous !== current) this.previous = new TokenKey(previous);
  }

  get all(): TokenKey[] {
    return this.previous ? [this.current, this.previous] : [this.current];
  }

  /** The key the box's daemon got its access token under: as stamped, else the current one. */
  forBox(box: PodBox): TokenKey {
    const id = box.metadata?.annotations?.[ANNOTATION_TOKEN_KEY];
    return this.all.find(k => k.id === id) ?? this.current;
  }

  /** The sandbox's access token, as its daemon holds it. */
  accessToken(box: PodBox): string {
    return accessToken(this.forBox(box).secret, box);
  }

  /** The sandbox's tokens, as create and connect answer them: its traffic token if it has one. */
  tokens(box: PodBox): { access: string; traffic: string | null } {
    const { secret } = this.forBox(box);
    return {
      access: accessToken(secret, box),
      traffic: servesPublicTraffic(box) ? null : trafficAccessToken(secret, box),
    };
  }

  /**
   * The credential for the daemon of the box's current Pod, signed by every key held: the
   * daemon trusts the control key of its Pod's start, whichever it was (podd/control).
   */
  credential(box: PodBox): string | undefined {
    const [first, ...others] = this.all.map(k => k.control.credential(box));
    if (first === undefined) return undefined;
    return [first, ...others.map(c => c!.slice(c!.indexOf(".") + 1))].join(".");
  }

  /** Seals envVars for the box of that namespace and name, under the current key. */
  sealEnvVars(envVars: Record<string, string>, ns: string, name: string): string {
    return this.current.seal(JSON.stringify(envVars), `${ns}/${name}`);
  }

  /** The envVars sealed into the box's annotation, as JSON; undefined when none or unreadable. */
  openEnvVars(box: PodBox): string | undefined {
    const sealed = box.metadata?.annotations?.[ANNOTATION_ENV_VARS];
    if (!sealed) return undefined;
    const ref = `${box.metadata?.namespace}/${box.metadata?.name}`;
    for (const key of this.all) {
      const opened = key.open(sealed, ref);
      if (opened !== undefined) return opened;
    }
    return undefined;
  }
}
