/**
 * Two network namespaces joined by a veth pair with private addresses: "two hosts" on one
 * machine for the multi-host tests. Names carry this process's pid and a random tag, so
 * parallel runs never collide; close() (also run on process exit) kills what the test started
 * inside them and deletes both (the veth goes with them); a later run deletes the namespaces
 * of a test process that died before it could (sweepStaleNamespaces).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";

export interface NetnsHost {
  ns: string;
  dev: string;
  addr: string;
  /** argv prefix that runs a command in this namespace with its own hostname (`unshare --uts`). */
  prefix(hostname: string): string[];
}

export interface NetnsPair {
  a: NetnsHost;
  b: NetnsHost;
  /** Pids of processes still inside either namespace. */
  pids(): number[];
  close(): void;
}

const PREFIX = "memlane-t";

function ip(...args: string[]): void {
  execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"], timeout: 10_000 });
}

/** Deletes `memlane-t<pid>-*` namespaces whose test process is gone. */
export function sweepStaleNamespaces(): void {
  const list = spawnSync("ip", ["netns", "list"], { encoding: "utf8" }).stdout ?? "";
  for (const line of list.split("\n")) {
    const m = new RegExp(`^(${PREFIX}(\\d+)-\\w+-[ab])\\b`).exec(line);
    if (!m || alive(Number(m[2]))) continue;
    killInside(m[1]!);
    spawnSync("ip", ["netns", "del", m[1]!]);
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

function pidsIn(ns: string): number[] {
  const r = spawnSync("ip", ["netns", "pids", ns], { encoding: "utf8" });
  return (r.stdout ?? "").split(/\s+/).filter(Boolean).map(Number);
}

function killInside(ns: string): void {
  for (const pid of pidsIn(ns)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone already
    }
  }
}

export function createNetnsPair(): NetnsPair {
  sweepStaleNamespaces();
  const tag = randomBytes(3).toString("hex");
  const subnet = `10.${200 + (randomBytes(1)[0]! % 50)}.${randomBytes(1)[0]!}`;
  const host = (side: "a" | "b", n: number): NetnsHost => {
    const ns = `${PREFIX}${process.pid}-${tag}-${side}`;
    return {
      ns, dev: `mlv${tag}${side}`, addr: `${subnet}.${n}`,
      prefix: (hostname) => ["ip", "netns", "exec", ns, "unshare", "--uts", "--", "sh", "-c", `hostname ${hostname} && exec "$0" "$@"`],
    };
  };
  const a = host("a", 1);
  const b = host("b", 2);
  let closed = false;
  const close = (): void => {
    if (closed) return;
    closed = true;
    process.off("exit", close);
    for (const h of [a, b]) {
      killInside(h.ns);
      spawnSync("ip", ["netns", "del", h.ns]);
    }
  };
  process.on("exit", close);
  try {
    ip("netns", "add", a.ns);
    ip("netns", "add", b.ns);
    ip("link", "add", a.dev, "type", "veth", "peer", "name", b.dev);
    for (const h of [a, b]) {
      ip("link", "set", h.dev, "netns", h.ns);
      ip("-n", h.ns, "addr", "add", `${h.addr}/30`, "dev", h.dev);
      ip("-n", h.ns, "link", "set", h.dev, "up");
      ip("-n", h.ns, "link", "set", "lo", "up");
    }
  } catch (err) {
    close();
    spawnSync("ip", ["link", "del", a.dev]); // if it never moved into a namespace
    const e = err as { stderr?: Buffer; message: string };
    throw new Error(`could not set up two network namespaces: ${e.stderr?.toString().trim() || e.message}`);
  }
  return { a, b, pids: () => [...pidsIn(a.ns), ...pidsIn(b.ns)], close };
}

/** Why two namespaces cannot be made here, or undefined when they can (tried for real). */
export function netnsUnavailable(): string | undefined {
  if (process.platform !== "linux") return `network namespaces are Linux only (platform ${process.platform})`;
  if (process.getuid?.() !== 0) return `creating network namespaces needs root (uid ${process.getuid?.()})`;
  for (const tool of ["ip", "unshare"]) {
    if (spawnSync(tool, ["-V"]).error) return `\`${tool}\` is not installed`;
  }
  let pair: NetnsPair | undefined;
  try {
    pair = createNetnsPair();
    // What the tests run: a command inside a namespace under its own host name.
    const probe = pair.a.prefix("memlane-probe");
    const r = spawnSync(probe[0]!, [...probe.slice(1), "true"], { encoding: "utf8", timeout: 10_000 });
    if (r.status !== 0) return `cannot run a command in a namespace with its own host name: ${(r.stderr || r.error?.message || `exit ${r.status}`).trim()}`;
    return undefined;
  } catch (err) {
    return (err as Error).message;
  } finally {
    pair?.close();
  }
}
