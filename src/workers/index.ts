// The supervision layer's public surface (src/index.ts re-exports from here).
export { Supervisor, type SupervisorOptions } from "./supervisor.ts";
export { WorkerHandle } from "./handle.ts";
export { WorkerError, type WorkerErrorInit, type WorkerIdentity } from "./worker-error.ts";
export { installShutdownHandlers, stopAllWorkers, liveWorkerCount, type ShutdownOptions } from "./cleanup.ts";
export type { WorkerSpec, SpawnOptions, RunOptions, TaskResult } from "./options.ts";
export type { ExitInfo } from "./process.ts";
export { workerSpecs, venvPython, memlaneRtBinary, REPO_ROOT, type WorkerSpecOptions } from "./specs.ts";
