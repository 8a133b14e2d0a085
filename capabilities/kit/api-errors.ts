/* How the API server's errors are told apart (pure). */

/** An error the API server will give again however often we retry (a 4xx other than the transient ones). */
export class PermanentError extends Error {}

/**
 * A write the API server refused (403: an admission plugin or webhook, a ResourceQuota, Pod
 * Security, a RuntimeClass that does not exist yet). Such a refusal can heal once its cause is
 * gone, so it is retried with backoff, and reported meanwhile.
 */
export class RefusedError extends Error {}

/**
 * A create refused because its namespace is being deleted. Everything in that namespace, the
 * CubePod objects included, is about to be deleted too: there is nothing to do and nothing to
 * report, and the deletion brings its own events.
 */
export class NamespaceTerminatingError extends Error {}

/**
 * True for the API server's refusal to create in a namespace being deleted: 403 with the cause
 * `NamespaceTerminating` (a StatusCause's type is serialised as `reason`).
 */
export function isNamespaceTerminating(e: unknown): boolean {
  type Status = { details?: { causes?: { reason?: string }[] } };
  const causes = (e as { data?: Status })?.data?.details?.causes ?? [];
  return statusOf(e) === 403 && causes.some(c => c.reason === "NamespaceTerminating");
}

/** The HTTP status of an error thrown by an API client (a `status` on the error), if any. */
export function statusOf(e: unknown): number | undefined {
  const s = (e as { status?: unknown })?.status;
  return typeof s === "number" ? s : undefined;
}

/**
 * True for errors worth retrying: server errors, throttling, timeouts, conflicts and anything
 * without an HTTP status (network errors).
 */
export function isRetryable(e: unknown): boolean {
  const s = statusOf(e);
  return s === undefined || s >= 500 || s === 429 || s === 408 || s === 409;
}

/** A short description of an API error for status messages and logs. */
export function describeError(e: unknown): string {
  const s = statusOf(e);
  const body = (e as { data?: { message?: string } })?.data?.message;
  const message =
    body ?? (e instanceof Error ? e.message : (e as { statusText?: string })?.statusText);
  return s ? `HTTP ${s}: ${message ?? "no message"}` : String(message ?? e);
}
