// Runs the test that stops and restarts the whole control plane last.
const Sequencer = require("@jest/test-sequencer").default;

class LastIsUpDown extends Sequencer {
  sort(tests) {
    const last = t => (t.path.endsWith("up-down.test.ts") ? 1 : 0);
    return [...tests].sort((a, b) => last(a) - last(b) || a.path.localeCompare(b.path));
  }
}

module.exports = LastIsUpDown;
