import https from "node:https";

/**
 * How long the module's HTTPS servers keep an idle connection open: longer than the API server
 * keeps one to a webhook (client-go's transports take Go's 90 s idle timeout).
 */
const WEBHOOK_KEEP_ALIVE_MS = 120_000;

/**
 * Node closes an idle connection after 5 s, while the API server keeps it for 90 s and sends the
 * next admission call on it. A call sent as Node closes the connection fails ("write: broken
 * pipe"), the webhook fails closed, and the user's create is refused. Pepr makes its webhook
 * server with no way to set the timeout, so every HTTPS server this process makes gets it; call
 * this before Pepr starts its server.
 */
export function outlastApiServerIdleConnections(): void {
  const createServer = https.createServer;
  https.createServer = ((...args: Parameters<typeof createServer>) => {
    const server = createServer(...args);
    server.keepAliveTimeout = WEBHOOK_KEEP_ALIVE_MS;
    return server;
  }) as typeof https.createServer;
}
