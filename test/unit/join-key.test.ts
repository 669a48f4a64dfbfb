import { chmodSync, chownSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadOrCreateJoinKey, parseJoinKey, readJoinKey } from "../../src/transport/join-key.ts";

const dir = mkdtempSync(join(tmpdir(), "memlane-joinkey-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("join key file", () => {
  it("is created 0600 once, then reused as it is", () => {
    const file = join(dir, "a.json");
    const first = loadOrCreateJoinKey(file);
    expect(first.created).toBe(true);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const again = loadOrCreateJoinKey(file);
    expect(again.created).toBe(false);
    expect(again.key).toEqual(first.key);
    expect(first.key.server.publicKey).not.toBe(first.key.client.publicKey);
    expect(first.key.joinSecret.length).toBe(32);
    expect(readdirSync(dir)).toEqual(["a.json"]); // no temporary file left beside it
  });

  it("is refused when other users can read it", () => {
    const file = join(dir, "b.json");
    loadOrCreateJoinKey(file);
    chmodSync(file, 0o644);
    expect(() => readJoinKey(file)).toThrow(`join key file ${file}: mode 644 lets other users read the secret; chmod 600 it`);
    expect(() => readJoinKey(join(dir, "missing.json"))).toThrow(/cannot read it \(ENOENT\); copy the file/);
  });

  it("is refused when another user owns it, or when it is no regular file", () => {
    expect(() => readJoinKey(dir)).toThrow(`join key file ${dir}: not a regular file`);
    const file = join(dir, "owned.json");
    loadOrCreateJoinKey(file);
    if (process.getuid?.() !== 0) {
      console.log("join-key owner check: skipped, only root can give a file to another uid here");
      return;
    }
    chownSync(file, 4321, 4321);
    expect(() => readJoinKey(file)).toThrow(`join key file ${file}: owned by uid 4321, not by this user (uid 0)`);
  });

  it("names the field that is wrong", () => {
    const good = JSON.parse(readFileSync(join(dir, "a.json"), "utf8")) as Record<string, unknown>;
    const text = (o: object): string => JSON.stringify({ ...good, ...o });
    expect(() => parseJoinKey("{", "f")).toThrow(/^join key file f: not JSON/);
    expect(() => parseJoinKey(text({ format: "x" }), "f")).toThrow('expected {"format": "memlane-join-key", ...}, got format "x"');
    expect(() => parseJoinKey(text({ v: 2 }), "f")).toThrow("join key file f: version 2, this memlane reads version 1");
    expect(() => parseJoinKey(text({ client: { publicKey: "short", secretKey: "x" } }), "f")).toThrow("`client.publicKey` must be a 40-character Z85 CURVE key");
    expect(() => parseJoinKey(text({ joinSecret: "ab" }), "f")).toThrow("`joinSecret` must be 64 lowercase hex characters");
    writeFileSync(join(dir, "c.json"), text({}), { mode: 0o600 });
    expect(readJoinKey(join(dir, "c.json")).client).toEqual(good.client);
  });
});
