/**
 * Broker endpoint options: parsed once, loopback unless the caller asks for a remote
 * endpoint and brings CURVE keys (docs/protocol.md: remote endpoints require authentication).
 */
import { readdirSync, rmSync, statSync } from "node:fs";
import { mkdtemp, chmod, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_MAX_MESSAGE_BYTES } from "./protocol.ts";

/** CURVE keys (Z85 text, 40 characters each) for a broker that accepts remote workers. */
export interface CurveServerKeys {
  publicKey: string;
  secretKey: string;
  /** Client public keys (Z85) allowed to connect; every client with the server key if absent. */
  authorizedClients?: string[];
}

/** Options of {@link Broker.bind}. */
export interface BrokerOptions {
  /**
   * `"ipc"` (the default: a socket in a fresh 0700 directory, so no other user can even
   * connect) or `"tcp"` (127.0.0.1, ephemeral port: any local user can connect, and only the
   * hello's auth keeps them out).
   */
  transport?: "tcp" | "ipc";
  /** An explicit endpoint instead of `transport`; must be loopback unless `allowRemote` is given. */
  endpoint?: string;
  /** Accept a non-loopback endpoint, authenticated with these CURVE server keys. */
  allowRemote?: { curve: CurveServerKeys };
  /** Receives one line per refused message or failed send (default: none). */
  log?: (line: string) => void;
  /**
   * The largest message accepted, in bytes (default DEFAULT_MAX_MESSAGE_BYTES, 256 MiB): each
   * frame (libzmq drops the connection of a peer that sends a bigger one) and all frames of a
   * message together (refused and the peer dropped). Workers spawned on this broker get the
   * same limit. Raise it for a run whose tensors travel as bigger frames.
   */
  maxMessageBytes?: number;
}

export interface ResolvedBrokerOptions {
  readonly transport: "tcp" | "ipc";
  readonly endpoint: string | undefined;
  readonly curve: CurveServerKeys | undefined;
  readonly log: (line: string) => void;
  readonly maxMessageBytes: number;
}

const DEFAULTS: ResolvedBrokerOptions = Object.freeze({
  transport: "ipc",
  endpoint: undefined,
  curve: undefined,
  log: () => {},
  maxMessageBytes: DEFAULT_MAX_MESSAGE_BYTES,
});

const bad = (option: string, expected: string, got: unknown): TypeError =>
  new TypeError(`broker option \`${option}\`: expected ${expected}, got ${JSON.stringify(got) ?? String(got)}`);

const LOOPBACK = /^tcp:\/\/(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|localhost|\[::1\]):(\d+|\*)$/;

export function isLoopbackEndpoint(endpoint: string): boolean {
  return endpoint.startsWith("ipc://") || endpoint.startsWith("inproc://") || LOOPBACK.test(endpoint);
}

export function resolveBrokerOptions(options: BrokerOptions = {}): ResolvedBrokerOptions {
  const transport = options.transport ?? DEFAULTS.transport;
  if (transport !== "tcp" && transport !== "ipc") throw bad("transport", '"tcp" or "ipc"', transport);
  const endpoint = options.endpoint;
  if (endpoint !== undefined && (typeof endpoint !== "string" || !/^(tcp|ipc|inproc):\/\/./.test(endpoint))) {
    throw bad("endpoint", "a tcp://, ipc:// or inproc:// endpoint", endpoint);
  }
  const curve = options.allowRemote?.curve;
  if (options.allowRemote !== undefined) {
    const z85 = (k: unknown): boolean => typeof k === "string" && k.length === 40;
    if (!curve || !z85(curve.publicKey) || !z85(curve.secretKey)) {
      throw bad("allowRemote.curve", "{publicKey, secretKey} as 40-character Z85 strings (zmq.curveKeyPair())", curve);
    }
    if (curve.authorizedClients !== undefined && !curve.authorizedClients.every(z85)) {
      throw bad("allowRemote.curve.authorizedClients", "40-character Z85 client public keys", curve.authorizedClients);
    }
  }
  if (endpoint !== undefined && !isLoopbackEndpoint(endpoint) && curve === undefined) {
    throw new Error(
      `broker endpoint ${endpoint} is not loopback: remote endpoints require authentication; ` +
        "pass allowRemote: { curve: { publicKey, secretKey } } (from zmq.curveKeyPair()) or use 127.0.0.1 / ipc://",
    );
  }
  if (options.log !== undefined && typeof options.log !== "function") throw bad("log", "a function", options.log);
  const maxMessageBytes = options.maxMessageBytes ?? DEFAULTS.maxMessageBytes;
  // ZMQ_MAXMSGSIZE is an int64; 1 KiB is the floor so a hello always fits.
  if (!Number.isSafeInteger(maxMessageBytes) || maxMessageBytes < 1024) {
    throw bad("maxMessageBytes", "an integer number of bytes >= 1024", options.maxMessageBytes);
  }
  return Object.freeze({ transport, endpoint, curve, log: options.log ?? DEFAULTS.log, maxMessageBytes });
}

/** The endpoint to bind, and the private directory to remove on close (ipc only). */
export async function endpointToBind(o: ResolvedBrokerOptions): Promise<{ bind: string; dir?: string }> {
  if (o.endpoint !== undefined) return { bind: o.endpoint };
  if (o.transport === "tcp") return { bind: "tcp://127.0.0.1:0" };
  sweepStaleIpcDirs();
  // mkdtemp creates the directory 0700 already; chmod again in case of an unusual umask
  // handling, since only our own user may reach the socket.
  const dir = await mkdtemp(join(tmpdir(), `${IPC_DIR_PREFIX}${process.pid}-`));
  trackIpcDir(dir);
  await chmod(dir, 0o700);
  const path = join(dir, "broker.sock");
  if (Buffer.byteLength(path) > MAX_IPC_PATH) {
    // sun_path holds 107 bytes: a long TMPDIR cannot hold the socket; loopback tcp still can.
    await removeIpcDir(dir);
    o.log(`broker: ${path} is too long for an ipc:// socket (${MAX_IPC_PATH} bytes at most); binding tcp://127.0.0.1 instead`);
    return { bind: "tcp://127.0.0.1:0" };
  }
  return { bind: `ipc://${path}`, dir };
}

const IPC_DIR_PREFIX = "memlane-ipc-";
const MAX_IPC_PATH = 107;

// The ipc directories this process made and has not removed yet. Broker.close() removes its
// own; an exit that skips it (a Ctrl-C's shutdown ends in process.exit, maybe before every
// supervisor has closed its broker) removes the rest in the 'exit' hook, which can only do
// synchronous work.
const liveIpcDirs = new Set<string>();
let ipcExitHookInstalled = false;

function trackIpcDir(dir: string): void {
  if (!ipcExitHookInstalled) {
    ipcExitHookInstalled = true;
    process.on("exit", () => {
      for (const d of liveIpcDirs) rmSync(d, { recursive: true, force: true });
      liveIpcDirs.clear();
    });
  }
  liveIpcDirs.add(dir);
}

/** Removes an ipc directory made by {@link endpointToBind} (the broker closed, or never bound). */
export async function removeIpcDir(dir: string): Promise<void> {
  liveIpcDirs.delete(dir);
  await rm(dir, { recursive: true, force: true });
}

/**
 * Removes the ipc directories of orchestrators that died before closing their broker
 * (SIGKILL): `memlane-ipc-<pid>-*` in TMPDIR whose pid is gone and which belong to us.
 */
export function sweepStaleIpcDirs(dir = tmpdir()): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const m = new RegExp(`^${IPC_DIR_PREFIX}(\\d+)-`).exec(name);
    if (!m || Number(m[1]) === process.pid || pidAlive(Number(m[1]))) continue;
    const path = join(dir, name);
    try {
      if (statSync(path).uid !== process.getuid?.()) continue;
      rmSync(path, { recursive: true, force: true });
      removed.push(path);
    } catch {
      // gone already, or not ours
    }
  }
  return removed;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
