/**
 * The process-wide registry of live workers, so that nothing outlives the orchestrator:
 * on SIGINT/SIGTERM every worker is stopped by escalation before exiting, and on any exit
 * whatever is still alive gets SIGKILL (an 'exit' handler cannot wait for anything).
 */

/** Something the registry can stop: politely (escalation) or at once (on exit). */
export interface Stoppable {
  stop(): Promise<unknown>;
  killNow(): void;
}

const live = new Set<Stoppable>();
let exitHookInstalled = false;
let signalHandlersInstalled = false;
let shuttingDown: Promise<void> | undefined;
let signalled: NodeJS.Signals | undefined;

/**
 * Whether {@link installShutdownHandlers} owns SIGINT/SIGTERM in this process: then other
 * child processes (chromium) are closed through {@link onShutdown}, not by their own handlers.
 */
export const shutdownHandlersInstalled = (): boolean => signalHandlersInstalled;

/** Whether a SIGINT/SIGTERM (or an EPIPE) started the process's shutdown: nothing new may start (no stage retry). */
export const shutdownStarted = (): boolean => signalled !== undefined;

/** How long a signal's shutdown waits for {@link onShutdown} work once the workers are stopped. */
export const SHUTDOWN_FINISH_MS = 5000;
const finishers = new Set<(signal: NodeJS.Signals) => Promise<unknown>>();

/**
 * Work a SIGINT/SIGTERM shutdown starts at once and waits for (at most SHUTDOWN_FINISH_MS
 * after the workers have stopped) before it exits: a run cancels its stages and writes its
 * partial report. Returns the function that forgets it.
 */
export function onShutdown(finish: (signal: NodeJS.Signals) => Promise<unknown>): () => void {
  finishers.add(finish);
  return () => finishers.delete(finish);
}

/** Track a live worker; returns the function that forgets it (call it when it has exited). */
export function register(s: Stoppable): () => void {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on("exit", killAllNow);
  }
  live.add(s);
  return () => live.delete(s);
}

/** How many workers are registered as live (tests use it). */
export const liveWorkerCount = (): number => live.size;

function killAllNow(): void {
  for (const s of live) s.killNow();
  live.clear();
}

/** Stop every live worker by escalation, all at once; resolves when all have exited. */
export function stopAllWorkers(): Promise<void> {
  shuttingDown ??= Promise.allSettled([...live].map((s) => s.stop())).then(() => {
    shuttingDown = undefined;
  });
  return shuttingDown;
}

/** Options of {@link installShutdownHandlers}. */
export interface ShutdownOptions {
  /** Called with a line when a signal starts the shutdown (default: write to stderr). */
  log?: (line: string) => void;
}

/** Exit codes of a shutdown: 128 + the signal's number, as a shell reports a process it killed. */
export const SIGNAL_EXIT = Object.freeze({ SIGINT: 130, SIGPIPE: 141, SIGTERM: 143 }) satisfies Partial<Record<NodeJS.Signals, number>>;

/**
 * Install SIGINT/SIGTERM handlers that stop every live worker by escalation (shutdown
 * message, SIGTERM, SIGKILL), let {@link onShutdown} work finish (bounded), and then exit
 * with 128 + the signal number (130 for Ctrl-C, 143 for SIGTERM).
 * A second signal during that shutdown kills the workers at once and exits. Idempotent:
 * calling it again does nothing. Normal exits are covered without it (workers get SIGKILL).
 *
 * Also the SIGPIPE a C program would die of: Node ignores that signal, so a write to a
 * stdout or stderr whose reader has gone (`memlane ... | head`) fails with EPIPE instead,
 * which was an unhandled 'error' event: a stack trace and exit 1 mid-run, workers SIGKILLed.
 * The first EPIPE now shuts down as that signal would (exit 141), later ones are ignored.
 */
export function installShutdownHandlers(options: ShutdownOptions = {}): void {
  if (signalHandlersInstalled) return;
  signalHandlersInstalled = true;
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on("exit", killAllNow);
  }
  let received: NodeJS.Signals | undefined;
  const onSignal = (signal: NodeJS.Signals): void => {
    const code = (SIGNAL_EXIT as Partial<Record<NodeJS.Signals, number>>)[signal] ?? 1;
    if (received) {
      killAllNow();
      process.exit(code);
    }
    received = signal;
    signalled = signal;
    // (a closed pipe with nothing to stop ends quietly, as SIGPIPE ends `ls | head`)
    if (signal !== "SIGPIPE") log(`memlane: ${signal} received, stopping ${live.size} worker(s)`);
    else if (live.size > 0 || finishers.size > 0) log(`memlane: output closed (EPIPE), stopping ${live.size} worker(s)`);
    const finishing = Promise.allSettled([...finishers].map((f) => f(signal)));
    void stopAllWorkers()
      .then(() => Promise.race([finishing, new Promise((r) => setTimeout(r, SHUTDOWN_FINISH_MS))]))
      .finally(() => process.exit(code));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  let pipeClosed = false;
  const onStreamError = (err: NodeJS.ErrnoException): void => {
    if (err.code !== "EPIPE") throw err;  // as without a listener: an uncaught error
    if (pipeClosed) return;  // every later write fails the same way (the log line too)
    pipeClosed = true;
    if (!received) onSignal("SIGPIPE");
  };
  process.stdout.on("error", onStreamError);
  process.stderr.on("error", onStreamError);
}
