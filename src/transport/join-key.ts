/**
 * The join key file: the one secret the hosts of a multi-host run share (docs/distributed.md,
 * "Two machines"). The orchestrator creates it on its first `--rdzv-endpoint` run (0600, never
 * overwritten) and reuses it; it is copied once to every other host, where `memlane join --key`
 * reads it. It holds:
 * - the broker's CURVE server keypair (the orchestrator binds with it; joiners pin its public
 *   key, so nobody without the file can pose as the orchestrator);
 * - one CURVE client keypair, the only client key the broker's ZAP handler admits (joiners and
 *   the ranks they start connect with it);
 * - `joinSecret`, the key a joiner's hello proves (auth.ts HMAC), as a spawned worker proves its
 *   per-spawn key.
 * Whoever holds the file can join a run or act as its orchestrator: treat it like an SSH key.
 */
import { randomBytes } from "node:crypto";
import { chmodSync, closeSync, existsSync, fstatSync, linkSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as zmq from "zeromq";

export const JOIN_KEY_FORMAT = "memlane-join-key";
export const JOIN_KEY_VERSION = 1;

export interface CurveKeyPair {
  publicKey: string;
  secretKey: string;
}

export interface JoinKey {
  server: CurveKeyPair;
  client: CurveKeyPair;
  /** 32 bytes: the key a joiner's hello.auth is an HMAC of. */
  joinSecret: Buffer;
}

/** A fresh key set. */
export function newJoinKey(): JoinKey {
  return { server: zmq.curveKeyPair(), client: zmq.curveKeyPair(), joinSecret: randomBytes(32) };
}

function serialize(k: JoinKey): string {
  return `${JSON.stringify({
    format: JOIN_KEY_FORMAT,
    v: JOIN_KEY_VERSION,
    server: k.server,
    client: k.client,
    joinSecret: k.joinSecret.toString("hex"),
  }, null, 2)}\n`;
}

const Z85_KEY = /^[0-9a-zA-Z.\-:+=^!/*?&<>()[\]{}@%$#]{40}$/;

/** Parses a key file's text; errors name the file and the field. */
export function parseJoinKey(text: string, file: string): JoinKey {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new Error(`join key file ${file}: not JSON (${(err as Error).message})`);
  }
  const o = raw as Record<string, unknown> | null;
  if (!o || typeof o !== "object" || o.format !== JOIN_KEY_FORMAT) {
    throw new Error(`join key file ${file}: expected {"format": "${JOIN_KEY_FORMAT}", ...}, got format ${JSON.stringify(o?.format)}`);
  }
  if (o.v !== JOIN_KEY_VERSION) throw new Error(`join key file ${file}: version ${JSON.stringify(o.v)}, this memlane reads version ${JOIN_KEY_VERSION}`);
  const pair = (name: "server" | "client"): CurveKeyPair => {
    const p = o[name] as Record<string, unknown> | undefined;
    for (const f of ["publicKey", "secretKey"] as const) {
      if (typeof p?.[f] !== "string" || !Z85_KEY.test(p[f] as string)) {
        throw new Error(`join key file ${file}: \`${name}.${f}\` must be a 40-character Z85 CURVE key`);
      }
    }
    return { publicKey: p!.publicKey as string, secretKey: p!.secretKey as string };
  };
  const secret = o.joinSecret;
  if (typeof secret !== "string" || !/^[0-9a-f]{64}$/.test(secret)) {
    throw new Error(`join key file ${file}: \`joinSecret\` must be 64 lowercase hex characters`);
  }
  return { server: pair("server"), client: pair("client"), joinSecret: Buffer.from(secret, "hex") };
}

/**
 * Reads a key file, refusing one that other users can read (the secret would be theirs too)
 * or that another user owns (they could rewrite it). One descriptor for the checks and the
 * read, so the file checked is the file read.
 */
export function readJoinKey(file: string): JoinKey {
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch (err) {
    throw new Error(`join key file ${file}: cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); ` +
      "copy the file the orchestrator wrote (`memlane run ... --rdzv-endpoint`) to this host");
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new Error(`join key file ${file}: not a regular file`);
    const uid = process.getuid?.();
    if (uid !== undefined && st.uid !== uid) {
      throw new Error(`join key file ${file}: owned by uid ${st.uid}, not by this user (uid ${uid}); copy it and chmod 600 the copy`);
    }
    if ((st.mode & 0o077) !== 0) {
      throw new Error(`join key file ${file}: mode ${(st.mode & 0o777).toString(8)} lets other users read the secret; chmod 600 it`);
    }
    return parseJoinKey(readFileSync(fd, "utf8"), file);
  } finally {
    closeSync(fd);
  }
}

/**
 * The key file at `file`: read when it exists, else created (0600). Written to a private
 * temporary name and linked into place: link(2) fails when the name exists, so two runs
 * starting at once never overwrite each other's key, and no reader sees a half-written file.
 */
export function loadOrCreateJoinKey(file: string): { key: JoinKey; created: boolean } {
  if (existsSync(file)) return { key: readJoinKey(file), created: false };
  const key = newJoinKey();
  const tmp = `${file}.${process.pid}-${randomBytes(4).toString("hex")}.tmp`;
  try {
    writeFileSync(tmp, serialize(key), { mode: 0o600, flag: "wx" });
    chmodSync(tmp, 0o600); // in case of an unusual umask
    linkSync(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return { key: readJoinKey(file), created: false };
    throw new Error(`join key file ${file}: cannot create it (${(err as Error).message})`);
  } finally {
    rmSync(tmp, { force: true });
  }
  return { key, created: true };
}
