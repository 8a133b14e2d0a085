import { verify, createPublicKey } from "node:crypto";
import type { PodBox } from "../../../capabilities/api/kinds";
import { accessToken } from "../../../gateway/e2b";
import {
  ANNOTATION_ENV_VARS,
  ANNOTATION_TOKEN_KEY,
  TokenKey,
  TokenKeys,
} from "../../../gateway/token-keys";

const OLD = "o".repeat(32);
const NEW = "n".repeat(32);
const box = (annotations: Record<string, string> = {}, name = "abc1"): PodBox =>
  ({
    metadata: { namespace: "team-a", name, uid: "box-uid", annotations },
    status: { podUID: "pod-uid" },
  }) as PodBox;

/** Whether one of the credential's signatures verifies under the key's public half. */
function signedBy(credential: string, key: TokenKey): boolean {
  const [payload, ...signatures] = credential.split(".");
  const [boxUID, podUID] = Buffer.from(payload, "base64url").toString().split("/");
  const publicKey = createPublicKey({
    key: Buffer.concat([
      Buffer.from("302a300506032b6570032100", "hex"),
      Buffer.from(key.control.publicKey, "base64"),
    ]),
    format: "der",
    type: "spki",
  });
  const message = Buffer.from(`cubepod-podd-control/v1\0${boxUID}\0${podUID}`);
  return signatures.some(s => verify(null, message, publicKey, Buffer.from(s, "base64url")));
}

describe("the gateway's token keys", () => {
  it("name a key by an id that is neither the key nor its plain hash, the same on every replica", () => {
    const a = new TokenKey(NEW);
    expect(a.id).toMatch(/^[0-9a-f]{16}$/);
    expect(new TokenKey(NEW).id).toBe(a.id);
    expect(new TokenKey(OLD).id).not.toBe(a.id);
    expect(NEW).not.toContain(a.id);
  });

  it("seal envVars that only the key opens, for that box only", () => {
    const keys = new TokenKeys(NEW);
    const sealed = keys.sealEnvVars({ TOKEN: "s3cret" }, "team-a", "abc1");
    expect(sealed).not.toContain("s3cret");
    expect(sealed).not.toContain(Buffer.from("s3cret").toString("base64"));
    expect(keys.openEnvVars(box({ [ANNOTATION_ENV_VARS]: sealed }))).toBe('{"TOKEN":"s3cret"}');
    // Copied onto another box, or opened by another install's key: nothing.
    expect(keys.openEnvVars(box({ [ANNOTATION_ENV_VARS]: sealed }, "abc2"))).toBeUndefined();
    expect(new TokenKeys(OLD).openEnvVars(box({ [ANNOTATION_ENV_VARS]: sealed }))).toBeUndefined();
    // Changed by whoever may write the box (its tenant): refused, not misread.
    // One character of the tag changed (not the last, whose low bits base64url may not use).
    const at = sealed.length - 10;
    const flipped = sealed.slice(0, at) + (sealed[at] === "A" ? "B" : "A") + sealed.slice(at + 1);
    expect(keys.openEnvVars(box({ [ANNOTATION_ENV_VARS]: flipped }))).toBeUndefined();
    for (const bad of ["", "v1", "v2.x.y.z", "v1...", "garbage"]) {
      expect(keys.openEnvVars(box({ [ANNOTATION_ENV_VARS]: bad }))).toBeUndefined();
    }
    expect(keys.openEnvVars(box())).toBeUndefined();
  });

  describe("through a rotation", () => {
    const before = new TokenKeys(OLD);
    const after = new TokenKeys(NEW, OLD);
    const startedBefore = box({
      [ANNOTATION_TOKEN_KEY]: before.current.id,
      [ANNOTATION_ENV_VARS]: before.sealEnvVars({ A: "1" }, "team-a", "abc1"),
    });

    it("a sandbox started before keeps its access token and envVars", () => {
      expect(after.forBox(startedBefore)).toBe(after.previous);
      expect(after.accessToken(startedBefore)).toBe(before.accessToken(startedBefore));
      expect(after.accessToken(startedBefore)).toBe(accessToken(OLD, startedBefore));
      expect(after.openEnvVars(startedBefore)).toBe('{"A":"1"}');
    });

    it("its daemon, trusting the old control key, takes the new credentials", () => {
      const credential = after.credential(startedBefore)!;
      expect(signedBy(credential, before.current)).toBe(true);
      expect(signedBy(credential, after.current)).toBe(true);
      expect(credential.split(".")).toHaveLength(3);
      // Without a previous key, one signature, as before rotations existed.
      expect(before.credential(startedBefore)!.split(".")).toHaveLength(2);
    });

    it("a sandbox started after, or whose key is gone, gets the current key", () => {
      expect(after.forBox(box({ [ANNOTATION_TOKEN_KEY]: after.current.id }))).toBe(after.current);
      expect(after.forBox(box())).toBe(after.current);
      const gone = new TokenKeys(NEW);
      expect(gone.forBox(startedBefore)).toBe(gone.current);
      expect(gone.openEnvVars(startedBefore)).toBeUndefined();
      expect(signedBy(gone.credential(startedBefore)!, before.current)).toBe(false);
    });

    it("a previous key equal to the current one is not kept twice", () => {
      expect(new TokenKeys(NEW, NEW).all).toHaveLength(1);
    });
  });
});
