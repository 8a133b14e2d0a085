import { createHmac, createPrivateKey, createPublicKey, KeyObject, sign } from "node:crypto";
import type { PodBox } from "../capabilities/api/kinds";

/** The header podd takes the gateway's credential in (podd/control). */
export const CONTROL_HEADER = "X-CubePod-Control";
/** Separates these signatures from anything else the key might ever sign; podd's own. */
const CONTEXT = "cubepod-podd-control/v1\0";
/** How many credentials the gateway keeps signed; past it, it starts again. */
const SIGNED_KEPT = 4096;
/** PKCS #8 DER of an Ed25519 private key, less its 32-byte seed (RFC 8410). */
const PKCS8_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");

/**
 * The key the gateway signs podd's credentials with, derived from the token key that every
 * replica already shares, so that replicas sign alike and no second secret is to be kept. The
 * module gets only the public half, which the webhook puts into each sandbox Pod.
 */
export class PoddControl {
  readonly #key: KeyObject;
  /** Credentials signed lately, by grant: proxied requests to one Pod all carry the same. */
  readonly #signed = new Map<string, string>();
  /** The public key as podd reads it (CUBEPOD_CONTROL_PUBLIC_KEY): 32 bytes, base64. */
  readonly publicKey: string;

  constructor(tokenKey: string) {
    this.#key = PoddControl.keyOf(
      createHmac("sha256", tokenKey).update("cubepod podd control key").digest(),
    );
    this.publicKey = publicKeyOf(this.#key);
  }

  /** The Ed25519 private key of a 32-byte seed. */
  static keyOf(seed: Buffer): KeyObject {
    return createPrivateKey({
      key: Buffer.concat([PKCS8_PREFIX, seed]),
      format: "der",
      type: "pkcs8",
    });
  }

  /**
   * The credential for the daemon of the box's current Pod, or undefined while the box names no
   * Pod UID. Ed25519 signs deterministically: every replica makes the same one.
   */
  credential(box: PodBox): string | undefined {
    const boxUID = box.metadata?.uid;
    const podUID = box.status?.podUID;
    if (!boxUID || !podUID) return undefined;
    const grant = `${boxUID}/${podUID}`;
    let credential = this.#signed.get(grant);
    if (credential === undefined) {
      if (this.#signed.size >= SIGNED_KEPT) this.#signed.clear();
      credential = signGrant(this.#key, boxUID, podUID);
      this.#signed.set(grant, credential);
    }
    return credential;
  }
}

/** A credential: the grant (box and Pod UIDs) and its signature, each base64url. */
export function signGrant(key: KeyObject, boxUID: string, podUID: string): string {
  const signature = sign(null, Buffer.from(`${CONTEXT}${boxUID}\0${podUID}`), key);
  return `${Buffer.from(`${boxUID}/${podUID}`).toString("base64url")}.${signature.toString("base64url")}`;
}

/** The raw 32-byte public key of an Ed25519 private key, base64. */
export function publicKeyOf(key: KeyObject): string {
  return createPublicKey(key)
    .export({ format: "der", type: "spki" })
    .subarray(-32)
    .toString("base64");
}
