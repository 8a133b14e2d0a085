import { TemplateSpecCache } from "../../../capabilities/admission/template-cache";
import { templateHash } from "../../../capabilities/manifests/template-hash";
import { template } from "../fixtures";

const v1 = template().spec;
const v2 = template({ image: "ghcr.io/x/sandbox:2" }).spec;

describe("TemplateSpecCache", () => {
  it("returns the cached spec only for its own hash", () => {
    const cache = new TemplateSpecCache();
    cache.put("ns", "python", v1);
    expect(cache.get("ns", "python", templateHash(v1))).toBe(v1);
    expect(cache.get("ns", "python", templateHash(v2))).toBeUndefined();
  });

  it("misses a Pod without a hash, another namespace and another template", () => {
    const cache = new TemplateSpecCache();
    cache.put("ns", "python", v1);
    expect(cache.get("ns", "python", undefined)).toBeUndefined();
    expect(cache.get("other", "python", templateHash(v1))).toBeUndefined();
    expect(cache.get("ns", "node", templateHash(v1))).toBeUndefined();
  });

  it("keeps the version read last", () => {
    const cache = new TemplateSpecCache();
    cache.put("ns", "python", v1);
    cache.put("ns", "python", v2);
    expect(cache.get("ns", "python", templateHash(v2))).toBe(v2);
    expect(cache.get("ns", "python", templateHash(v1))).toBeUndefined();
  });

  it("drops the least recently used template beyond its size", () => {
    const cache = new TemplateSpecCache(2);
    cache.put("ns", "a", v1);
    cache.put("ns", "b", v1);
    expect(cache.get("ns", "a", templateHash(v1))).toBe(v1); // a is now the most recent
    cache.put("ns", "c", v1);
    expect(cache.get("ns", "b", templateHash(v1))).toBeUndefined();
    expect(cache.get("ns", "a", templateHash(v1))).toBe(v1);
    expect(cache.get("ns", "c", templateHash(v1))).toBe(v1);
  });
});
