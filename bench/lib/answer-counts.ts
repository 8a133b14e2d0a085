import { tenths } from "./stats";

/**
 * A client's answers by kind, from the time it was made until {@link AnswerCounts.stop}: the
 * calls served (2xx), refused for the rate (429, and of those how many said when to retry), any
 * other answer, and the calls that got none (the connection failed or timed out). Pure but for
 * the times passed in.
 */
export class AnswerCounts {
  #ok = 0;
  #tooMany = 0;
  #retryAfter = 0;
  #other = 0;
  #errors = 0;
  #to?: number;

  /** `from`: when counting started (ms, any clock the stop's time is on). */
  constructor(readonly from: number) {}

  /** An answer of `status`, with or without a `Retry-After` header; none counts once stopped. */
  answered(status: number, retryAfter: boolean): void {
    if (this.#to !== undefined) return;
    if (status >= 200 && status < 300) this.#ok++;
    else if (status === 429) {
      this.#tooMany++;
      if (retryAfter) this.#retryAfter++;
    } else this.#other++;
  }

  /** A call that got no answer. */
  failed(): void {
    if (this.#to === undefined) this.#errors++;
  }

  /** Ends the count at `at`: answers that come later are the flood's tail, not its rate. */
  stop(at: number): void {
    this.#to ??= at;
  }

  /** The counts, and the rates over the time counted (until now when not stopped). */
  summary(now: number) {
    const seconds = ((this.#to ?? now) - this.from) / 1000;
    const answered = this.#ok + this.#tooMany + this.#other;
    const perS = (n: number) => (seconds > 0 ? tenths(n / seconds) : 0);
    return {
      seconds: tenths(seconds),
      answered,
      ok: this.#ok,
      tooMany: this.#tooMany,
      tooManyWithRetryAfter: this.#retryAfter,
      otherAnswers: this.#other,
      errors: this.#errors,
      answeredPerS: perS(answered),
      okPerS: perS(this.#ok),
      tooManyPercent: answered > 0 ? tenths((100 * this.#tooMany) / answered) : 0,
    };
  }
}

export type AnswerSummary = ReturnType<AnswerCounts["summary"]>;
