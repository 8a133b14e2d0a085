import { AnswerCounts } from "../../../bench/lib/answer-counts";

describe("AnswerCounts", () => {
  it("counts served, refused for the rate (with and without Retry-After), other and none", () => {
    const c = new AnswerCounts(1000);
    c.answered(200, false);
    c.answered(204, false);
    c.answered(429, true);
    c.answered(429, true);
    c.answered(429, false);
    c.answered(500, false);
    c.failed();
    expect(c.summary(3000)).toEqual({
      seconds: 2,
      answered: 6,
      ok: 2,
      tooMany: 3,
      tooManyWithRetryAfter: 2,
      otherAnswers: 1,
      errors: 1,
      answeredPerS: 3,
      okPerS: 1,
      tooManyPercent: 50,
    });
  });

  it("counts nothing after its stop, and takes its rates over the time to the stop", () => {
    const c = new AnswerCounts(0);
    for (let i = 0; i < 10; i++) c.answered(429, true);
    c.stop(500);
    c.stop(900);
    c.answered(200, false);
    c.failed();
    const s = c.summary(10_000);
    expect(s).toMatchObject({ seconds: 0.5, answered: 10, ok: 0, errors: 0 });
    expect(s.answeredPerS).toBe(20);
    expect(s.tooManyPercent).toBe(100);
  });

  it("gives rates and shares of 0, not NaN, when nothing was counted", () => {
    const s = new AnswerCounts(5).summary(5);
    expect(s.answeredPerS).toBe(0);
    expect(s.tooManyPercent).toBe(0);
  });
});
