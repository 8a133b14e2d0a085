/**
 * Kubernetes quantities (resource.Quantity) as the API server reads them: a decimal number with
 * an optional binary (Ki..Ei), decimal (n, u, m, k, M..E) or exponent suffix. No named groups: the
 * pattern goes into the CRD schema, which the API server compiles with Go's regexp.
 */
export const QUANTITY_PATTERN =
  /^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$/;

const SUFFIXES: Record<string, number> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};

/** The value of a quantity in its base unit (bytes, cores), or undefined when it is not one. */
export function quantityValue(q: string): number | undefined {
  const m = QUANTITY_PATTERN.exec(q);
  if (!m) return undefined;
  const suffix = m[3] ?? "";
  const number = Number(q.slice(0, q.length - suffix.length));
  if (suffix === "") return number;
  if (suffix in SUFFIXES) return number * SUFFIXES[suffix];
  return number * 10 ** Number(suffix.slice(1));
}
