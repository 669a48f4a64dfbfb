import { describe, expect, it } from "vitest";
import { helloAuth, newWorkerKey, verifyHelloAuth } from "../../src/transport/auth.ts";
import { RefusalLog, describeRefusals } from "../../src/transport/refusals.ts";

// The same value is checked by native/runtime/tests/hmac_test.cc and python/tests/test_auth.py.
const GOLDEN = "522fecf8dc58afd908d0e095efe77b1cca68f3ba1501bab395a5a06711a690ed";
const KEY = Uint8Array.from({ length: 32 }, (_, i) => i);

describe("hello auth", () => {
  it("is HMAC-SHA256 over the prefix, id and pid, as every language computes it", () => {
    expect(helloAuth(KEY, "memlane-rt-4242", 4242)).toBe(GOLDEN);
    expect(verifyHelloAuth(KEY, "memlane-rt-4242", 4242, GOLDEN)).toBe(true);
    expect(verifyHelloAuth(KEY, "memlane-rt-4242", 4242, GOLDEN.toUpperCase())).toBe(true);
  });

  it("refuses another key, id or pid, and anything that is not 64 hex characters", () => {
    expect(verifyHelloAuth(newWorkerKey(), "memlane-rt-4242", 4242, GOLDEN)).toBe(false);
    expect(verifyHelloAuth(KEY, "memlane-rt-4243", 4242, GOLDEN)).toBe(false);
    expect(verifyHelloAuth(KEY, "memlane-rt-4242", 4243, GOLDEN)).toBe(false);
    for (const bad of [undefined, null, 42, "", GOLDEN.slice(1), `${GOLDEN}0`, { length: 64 }, "é".repeat(32)])
      expect(verifyHelloAuth(KEY, "memlane-rt-4242", 4242, bad)).toBe(false);
    expect(verifyHelloAuth(KEY, 7, 4242, GOLDEN)).toBe(false);
    expect(verifyHelloAuth(KEY, "memlane-rt-4242", "4242", GOLDEN)).toBe(false);
  });

  it("gives each spawn a different 32-byte key", () => {
    const a = newWorkerKey();
    expect(a.length).toBe(32);
    expect(a.equals(newWorkerKey())).toBe(false);
  });
});

describe("the refusal log", () => {
  it("counts every refusal by reason, keeps and logs the first five of each, then powers of ten", () => {
    const lines: string[] = [];
    const log = new RefusalLog((l) => lines.push(l));
    for (let i = 0; i < 1234; i++) log.add("bad-auth", "00", `forged ${i}`);
    log.add("malformed", "01", "not msgpack");
    const s = log.summary();
    expect(s.total).toBe(1235);
    expect(s.byReason).toEqual({ "bad-auth": 1234, malformed: 1 });
    expect(s.samples.map((r) => r.text)).toEqual(["forged 0", "forged 1", "forged 2", "forged 3", "forged 4", "not msgpack"]);
    expect(lines.length).toBe(5 + 3 + 1); // 5 in full, then 10, 100, 1000; and the malformed one
    expect(describeRefusals(s)).toBe("transport: 1235 message(s) refused (1 malformed, 1234 bad-auth); first: forged 0");
    expect(describeRefusals(new RefusalLog(() => {}).summary())).toBeUndefined();
  });
});

describe("refusal texts", () => {
  it("are cut at 300 characters and carry no control characters (they quote what a peer sent)", () => {
    const lines: string[] = [];
    const log = new RefusalLog((l) => lines.push(l));
    log.add("malformed", "00", `tensor "\x1b[2J${"x".repeat(1000)}"`);
    const text = log.summary().samples[0]!.text;
    expect(text.length).toBe(301);
    expect(text.startsWith('tensor "?[2J')).toBe(true);
    expect(lines[0]).not.toMatch(/\x1b/);
  });
});
