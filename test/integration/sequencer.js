// Runs the file that reads the audit log of every other file (rbac) second to last, and the one
// that stops and restarts the whole control plane last.
const Sequencer = require("@jest/test-sequencer").default;

const LAST = ["rbac.test.ts", "up-down.test.ts"];

class AuditThenUpDownLast extends Sequencer {
  sort(tests) {
    const rank = t => LAST.findIndex(name => t.path.endsWith(`/${name}`));
    return [...tests].sort((a, b) => rank(a) - rank(b) || a.path.localeCompare(b.path));
  }
}

module.exports = AuditThenUpDownLast;
