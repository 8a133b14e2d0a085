import { randomBytes } from "node:crypto";
import { ApiError } from "./e2b";

/**
 * An error no rule expected (the API server's, a bug), as the tenant gets it: a 500 that names a
 * request ID and nothing else, since its text may carry the cluster's internals (addresses,
 * the API server's messages). The detail is logged under that ID. An {@link ApiError} is meant
 * for the tenant and passes unchanged.
 */
export function internalError(e: unknown, context: Record<string, string> = {}): ApiError {
  if (e instanceof ApiError) return e;
  const request = randomBytes(8).toString("hex");
  const error = e instanceof Error ? (e.stack ?? e.message) : String(e);
  console.error(
    JSON.stringify({ level: "error", msg: "internal error", request, ...context, error }),
  );
  return new ApiError(500, `internal error; see the gateway's log (request ${request})`);
}
