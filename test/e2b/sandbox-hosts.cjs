"use strict";
/**
 * Loaded into the JS suite's processes (NODE_OPTIONS=--require): a TLS connection to a sandbox's
 * host, `https://<port>-<id>.<domain>` on port 443, goes to the local gateway's HTTPS port. It
 * stands in for the wildcard DNS name a deployment gives its gateway, which this machine has no
 * way to serve; the name stays the TLS server name, so the certificate is checked against it.
 * Every TLS client of Node (its fetch, the `undici` the SDK brings, https, http2) opens its
 * connections with `tls.connect`.
 */
const tls = require("node:tls");

const DOMAIN = process.env.CUBEPOD_E2B_DOMAIN;
const PORT = Number(process.env.CUBEPOD_E2B_TLS_PORT);
if (!DOMAIN || !PORT)
  throw new Error("sandbox-hosts.cjs needs CUBEPOD_E2B_DOMAIN and CUBEPOD_E2B_TLS_PORT");

const ours = host =>
  typeof host === "string" && (host === DOMAIN || host.toLowerCase().endsWith(`.${DOMAIN}`));

const connect = tls.connect;
tls.connect = function (...args) {
  const callback = typeof args[args.length - 1] === "function" ? args.pop() : undefined;
  // tls.connect(options) or tls.connect(port[, host][, options])
  let options = typeof args[0] === "object" && args[0] !== null ? { ...args[0] } : {};
  if (typeof args[0] !== "object") {
    const extra = args.find((a, i) => i > 0 && typeof a === "object" && a !== null);
    options = {
      ...extra,
      port: args[0],
      ...(typeof args[1] === "string" ? { host: args[1] } : {}),
    };
  }
  const host = options.host ?? options.hostname;
  if (options.socket || !ours(host) || Number(options.port ?? 443) !== 443) {
    return connect.apply(this, callback ? [...args, callback] : args);
  }
  const routed = {
    ...options,
    host: "127.0.0.1",
    port: PORT,
    servername: options.servername || host,
  };
  delete routed.hostname;
  return callback ? connect.call(this, routed, callback) : connect.call(this, routed);
};
