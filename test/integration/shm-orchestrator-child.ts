// Child for test/integration/shm-lifecycle.test.ts: an orchestrator-like process that makes
// `count` segments in a ShmRegistry, prints their names as one JSON line, then either waits
// to be signalled/killed or (mode "exit") exits without closing the registry. Mode "task":
// the segments are those of real tasks in flight: a Supervisor with the registry sends a
// 2 MiB tensor with each of `count` `sleep` tasks to the echo fixture (ECHO_SHM=1).
import { ShmRegistry } from "../../src/transport/shm.ts";
import { Supervisor } from "../../src/workers/supervisor.ts";
import { fixture } from "./supervisor-helpers.ts";

const [runId = "child", count = "3", mode = "wait", addonPath] = process.argv.slice(2);
const reg = new ShmRegistry({ runId, thresholdBytes: mode === "task" ? undefined : 0, addonPath: addonPath || undefined });
if (mode === "task") {
  const sup = await Supervisor.start({ shm: reg });
  const w = await sup.spawn(fixture("echo", "echo-shm", { ECHO_SHM: "1" }));
  for (let i = 0; i < Number(count); i++)
    void w.run("sleep", { ms: 60_000 }, { tensors: { x: { dtype: "uint8", shape: [2 << 20], data: new Uint8Array(2 << 20) } } }).catch(() => {});
  process.stdout.write(`${JSON.stringify({ pid: process.pid, names: reg.names, worker: w.pid })}\n`);
} else {
  for (let i = 0; i < Number(count); i++) reg.allocate(4096).write(0, new Uint8Array([1, 2, 3]));
  process.stdout.write(`${JSON.stringify({ pid: process.pid, names: reg.names })}\n`);
  if (mode === "exit") process.exit(0);
}
setInterval(() => {}, 1000);
