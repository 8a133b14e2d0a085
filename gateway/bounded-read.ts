/**
 * The most of a daemon's answer the control API reads: its `/metrics` and `/init` answers are a
 * few hundred bytes, and a sandbox's daemon runs beside the tenant's code, so its answers are
 * not trusted to be small.
 */
export const MAX_DAEMON_ANSWER_BYTES = 64 * 1024;

/** An answer read no further than its bound. */
export class AnswerTooLarge extends Error {
  constructor(readonly max: number) {
    super(`its answer is larger than ${max} bytes`);
  }
}

/** A readable answer body, as undici's `request` gives it. */
type Body = AsyncIterable<Buffer | string> & { destroy(error?: Error): unknown };

/**
 * An answer's body as text, read to `max` bytes at most: past them the body is destroyed (the
 * connection with it) and {@link AnswerTooLarge} is thrown, before more is buffered.
 */
export async function readBoundedText(body: Body, max: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buffer = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
    size += buffer.length;
    if (size > max) {
      const error = new AnswerTooLarge(max);
      body.destroy(error);
      throw error;
    }
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}
