// The E2B SDK's CommonJS build requires chalk 5, which is ESM only and which Jest (on Node 20)
// cannot require. The SDK only colours console messages with it: here they stay plain. A style
// (`chalk.red(text)`) returns the text; a colour maker (`chalk.hex("#fff")`) returns a style.
const MAKERS = new Set(["hex", "bgHex", "rgb", "bgRgb", "ansi256", "bgAnsi256"]);
function style(maker) {
  return new Proxy(function () {}, {
    get: (_, key) => style(MAKERS.has(key)),
    apply: (_, __, args) => (maker ? style(false) : args.join(" ")),
  });
}
const chalk = style(false);
module.exports = chalk;
module.exports.default = chalk;
