import { Log } from "pepr";
import { reconcileErrors } from "../metrics/registry";
import { describeError } from "./api-errors";

/** The queue's onError for a kind: counts the failure and logs the retry to come. */
export function reportRetry(
  kind: "PodBox" | "PodWarmPool" | "PodTemplate",
  field: "box" | "pool" | "network" | "seed",
) {
  return (key: string, error: unknown, attempt: number, retryInMs: number): void => {
    reconcileErrors.inc({ kind, permanent: "false" });
    Log.warn(
      { [field]: key, attempt, retryInMs, error: describeError(error) },
      `${kind} reconcile failed; retrying`,
    );
  };
}
