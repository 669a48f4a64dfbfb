/**
 * Worker authentication: each spawn gets 32 random bytes (its key), handed over in the
 * environment (ENV_WORKER_KEY), never in argv. The worker proves it holds the key with an
 * HMAC in its hello; the broker gives a waiting slot only to the hello its key verifies, so a
 * peer that merely knows the endpoint, a pid and a name gets nothing. docs/protocol.md, "Trust".
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { HELLO_AUTH_PREFIX, RANK_KEY_PREFIX } from "./protocol.ts";

export const WORKER_KEY_BYTES = 32;

/** A fresh key for one spawn. */
export function newWorkerKey(): Buffer {
  return randomBytes(WORKER_KEY_BYTES);
}

/**
 * The key rank `rank` of a distributed stage proves: derived from the stage key all ranks get,
 * so one secret crosses to the launcher and a rank numbered wrongly cannot take another's slot
 * by mistake (any rank could derive any rank's key: a mix-up guard, not a security boundary).
 */
export function rankKey(stageKey: Uint8Array, rank: number): Buffer {
  return createHmac("sha256", stageKey).update(`${RANK_KEY_PREFIX}${rank}`, "utf8").digest();
}

/** The `auth` a hello with this id and pid carries when its sender holds `key` (hex). */
export function helloAuth(key: Uint8Array, id: string, pid: number): string {
  return createHmac("sha256", key).update(`${HELLO_AUTH_PREFIX}${id}\n${pid}`, "utf8").digest("hex");
}

/** True when `auth` proves `key` for this id and pid (constant-time comparison). */
export function verifyHelloAuth(key: Uint8Array, id: unknown, pid: unknown, auth: unknown): boolean {
  if (typeof auth !== "string" || auth.length !== 64 || typeof id !== "string") return false;
  if (typeof pid !== "number" || !Number.isSafeInteger(pid)) return false;
  const want = Buffer.from(helloAuth(key, id, pid), "utf8");
  return timingSafeEqual(want, Buffer.from(auth.toLowerCase(), "utf8"));
}
