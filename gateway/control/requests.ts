/** What a call's body and query say, read alike by several resources: bodies, and lists' pages. */
import type { z } from "zod";
import { ApiError, invalidBody } from "../e2b";

/** The body by its schema; else a 400 naming each field. */
export function parse<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw invalidBody(parsed.error);
  return parsed.data;
}

/** A list's `limit`: 1 to 100, 100 when not given. */
export function limitOf(query: URLSearchParams): number {
  const raw = query.get("limit") ?? "100";
  const limit = /^\d+$/.test(raw) ? Number(raw) : NaN;
  if (!(limit >= 1 && limit <= 100)) {
    throw new ApiError(400, `limit: expected an integer from 1 to 100, got "${raw}"`);
  }
  return limit;
}

/** Where a list's next page starts: the last listed sandbox's sort key, opaque to the client. */
export const pageToken = {
  write: (k: { at: number; name: string }) =>
    Buffer.from(JSON.stringify([k.at, k.name])).toString("base64url"),
  read(token: string): { at: number; name: string } {
    try {
      const [at, name] = JSON.parse(Buffer.from(token, "base64url").toString()) as unknown[];
      if (typeof at === "number" && typeof name === "string") return { at, name };
    } catch {
      // answered below
    }
    throw new ApiError(400, `nextToken: "${token}" is not a token this API gave`);
  },
};
