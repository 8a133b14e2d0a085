/**
 * Where a sharded watcher writes its process id: in a Pod the module is a child of Pepr's
 * controller, which as PID 1 ignores SIGTERM, so the chart's preStop hook sends it to this one.
 */
export const PID_FILE = "/tmp/cubepod-watcher.pid";
