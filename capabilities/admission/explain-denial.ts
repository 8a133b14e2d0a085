/** The fields of Pepr's MutateResponse / ValidateResponse this hook reads and writes. */
export type AdmissionResponseLike = {
  allowed: boolean;
  warnings?: string[];
  status?: { code: number; message: string };
};

const PREFIX = "Action failed: ";

/**
 * Pepr answers a Mutate action that throws with `allowed: false` and the error only as a warning,
 * so the API server reports "denied the request without explanation". This `afterHook` copies the
 * error into the response status, so the user sees why (e.g. the PodTemplate does not exist).
 */
export function explainMutateDenial(r: AdmissionResponseLike): void {
  if (r.allowed || r.status) return;
  const reasons = (r.warnings ?? []).map(w => (w.startsWith(PREFIX) ? w.slice(PREFIX.length) : w));
  if (reasons.length === 0) return;
  r.status = { code: 400, message: reasons.join("; ") };
}
