// Child for test/integration/shm-lifecycle.test.ts: an orchestrator-like process that makes
// `count` segments in a ShmRegistry, prints their names as one JSON line, then either waits
// to be signalled/killed or (mode "exit") exits without closing the registry.
import { ShmRegistry } from "../../src/transport/shm.ts";

const [runId = "child", count = "3", mode = "wait", addonPath] = process.argv.slice(2);
const reg = new ShmRegistry({ runId, thresholdBytes: 0, addonPath: addonPath || undefined });
for (let i = 0; i < Number(count); i++) reg.allocate(4096).write(0, new Uint8Array([1, 2, 3]));
process.stdout.write(`${JSON.stringify({ pid: process.pid, names: reg.names })}\n`);
if (mode === "exit") process.exit(0);
setInterval(() => {}, 1000);
