import { ControlKey, TOKEN_KEY_SECRET } from "../../capabilities/admission/control-key";
import { ApiClient } from "../../capabilities/client/api-client";
import { credentialsOf, Kube, paths } from "../../testkit/kube";

/*
 * The gateway's token key, made in the cluster by the module (no artifact holds it), against the
 * real API server: each install's namespace gets its own, module processes starting together
 * agree on one, and a key already there (a rotation's, the local cluster's) is the one used.
 */

const kube = new Kube();
let client: ApiClient;
const namespaces: string[] = [];

beforeAll(async () => {
  const credentials = credentialsOf();
  client = new ApiClient(30_000, async () => credentials, "cubepod-tests");
  for (const name of ["it-key-a", "it-key-b", "it-key-c"]) {
    namespaces.push(await kube.namespace(name));
  }
});
afterAll(async () => {
  for (const ns of namespaces) await kube.delete(`/api/v1/namespaces/${ns}`);
  kube.close();
});

const keyOf = async (ns: string) =>
  Buffer.from(
    (await kube.get(paths.secrets(ns, TOKEN_KEY_SECRET))).body.data.key,
    "base64",
  ).toString();

describe("the gateway's token key, made at the module's first start", () => {
  it("is made once per install: two installs' keys differ, and a restart reads the same", async () => {
    const [a, b] = namespaces;
    const first = await new ControlKey(client, a).publicKey();
    expect(first).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    expect(await keyOf(a)).toMatch(/^[0-9a-f]{64}$/);
    // A restarted module (a new process) reads the key its namespace has.
    expect(await new ControlKey(client, a).publicKey()).toBe(first);
    const other = await new ControlKey(client, b).publicKey();
    expect(other).not.toBe(first);
    expect(await keyOf(b)).not.toBe(await keyOf(a));
  });

  it("is one key when several module processes start at once", async () => {
    const ns = namespaces[2];
    const keys = await Promise.all(
      Array.from({ length: 6 }, () => new ControlKey(client, ns).publicKey()),
    );
    expect(new Set(keys).size).toBe(1);
  });

  it("refuses, naming the Secret, a key too short to be one, and reads it again once mended", async () => {
    const ns = namespaces[0];
    const merge = "application/merge-patch+json";
    await kube.request(
      "PATCH",
      paths.secrets(ns, TOKEN_KEY_SECRET),
      { data: { key: "c2hvcnQ=" } },
      merge,
    );
    const key = new ControlKey(client, ns);
    await expect(key.publicKey()).rejects.toThrow(
      `Secret ${ns}/${TOKEN_KEY_SECRET} has no key of at least 32 characters in data.key`,
    );
    await kube.request(
      "PATCH",
      paths.secrets(ns, TOKEN_KEY_SECRET),
      { data: { key: Buffer.from("k".repeat(64)).toString("base64") } },
      merge,
    );
    expect(await key.publicKey()).toMatch(/^[A-Za-z0-9+/]{43}=$/);
  });
});
