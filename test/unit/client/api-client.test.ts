import { sameEndpoint } from "../../../capabilities/client/api-client";

describe("sameEndpoint", () => {
  const base = {
    server: "https://127.0.0.1:6443",
    ca: Buffer.from("CA"),
    cert: Buffer.from("CERT"),
    key: Buffer.from("KEY"),
    authorization: "Bearer one",
  };

  it("is the same endpoint when only the token changed, or the same PEM came as a string", () => {
    expect(sameEndpoint(base, { ...base, authorization: "Bearer two" })).toBe(true);
    expect(sameEndpoint(base, { ...base, ca: "CA", cert: ["CERT"] })).toBe(true);
    const bare = { server: base.server };
    expect(sameEndpoint(bare, { ...bare, authorization: "Bearer three" })).toBe(true);
  });

  it("is another endpoint for another server, CA, certificate or key, or one left out", () => {
    expect(sameEndpoint(base, { ...base, server: "https://127.0.0.1:6444" })).toBe(false);
    expect(sameEndpoint(base, { ...base, ca: Buffer.from("CA2") })).toBe(false);
    expect(sameEndpoint(base, { ...base, ca: ["CA", "CA2"] })).toBe(false);
    expect(sameEndpoint(base, { ...base, cert: Buffer.from("CERT2") })).toBe(false);
    expect(sameEndpoint(base, { ...base, key: Buffer.from("KEY2") })).toBe(false);
    expect(sameEndpoint(base, { ...base, key: undefined })).toBe(false);
  });
});
