import { Log } from "pepr";
import { reconcileErrors } from "../metrics/registry";

/** An error the API server will give again however often we retry (a 4xx other than the transient ones). */
export class PermanentError extends Error {}

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

/** The queue's onError for a kind: counts the failure and logs the retry to come. */
export function reportRetry(kind: "PodBox" | "PodWarmPool", field: "box" | "pool") {
  return (key: string, error: unknown, attempt: number, retryInMs: number): void => {
    reconcileErrors.inc({ kind, permanent: "false" });
    Log.warn(
      { [field]: key, attempt, retryInMs, error: describeError(error) },
      `${kind} reconcile failed; retrying`,
    );
  };
}
