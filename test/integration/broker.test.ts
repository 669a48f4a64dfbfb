import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import * as zmq from "zeromq";
import { helloAuth, newWorkerKey } from "../../src/transport/auth.ts";
import { Broker } from "../../src/transport/broker.ts";
import { decodeRaw, encodeEnvelope } from "../../src/transport/codec.ts";
import { sweepStaleIpcDirs } from "../../src/transport/endpoint.ts";
import { ErrorCode, PROTOCOL_VERSION, type ErrorMessage } from "../../src/transport/protocol.ts";
import { Supervisor } from "../../src/workers/supervisor.ts";
import { fixture } from "./supervisor-helpers.ts";

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function broker(options: Parameters<typeof Broker.bind>[0] = {}): Promise<Broker> {
  const b = await Broker.bind(options);
  cleanups.push(() => b.close());
  return b;
}

function dealer(endpoint: string, options: Partial<zmq.Dealer> = {}): zmq.Dealer {
  const d = new zmq.Dealer({ linger: 0, receiveTimeout: 3000, ...options });
  d.connect(endpoint);
  cleanups.push(() => d.close());
  return d;
}

async function reply(d: zmq.Dealer): Promise<ErrorMessage> {
  const [env] = await d.receive();
  return decodeRaw(env!) as ErrorMessage;
}

const hello = (v = PROTOCOL_VERSION, pid = 999_999, key?: Uint8Array): Buffer =>
  encodeEnvelope({
    v, type: "hello", id: "raw-hello", pid, worker: "raw", capabilities: [], versions: {},
    ...(key ? { auth: helloAuth(key, "raw-hello", pid) } : {}),
  });

describe("endpoints", () => {
  it("binds ipc:// by default; with transport tcp, 127.0.0.1 on an ephemeral port, the real port read back", async () => {
    expect((await broker()).endpoint).toMatch(/^ipc:\/\/.*\/memlane-ipc-\d+-[^/]+\/broker\.sock$/);
    const b = await broker({ transport: "tcp" });
    expect(b.endpoint).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/);
    expect(b.endpoint.endsWith(":0")).toBe(false);
  });

  it("binds ipc:// in a fresh 0700 directory and removes it on close", async () => {
    const b = await Broker.bind({ transport: "ipc" });
    const dir = dirname(b.endpoint.slice("ipc://".length));
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    await b.close();
    expect(() => statSync(dir)).toThrow();
  });

  it("sweeps the ipc directory of an orchestrator that died without closing its broker", async () => {
    const root = mkdtempSync(join(tmpdir(), "memlane-sweep-"));
    cleanups.push(() => rmSync(root, { recursive: true, force: true }));
    const dead = spawnSync("true").pid!; // a pid that has exited
    mkdirSync(join(root, `memlane-ipc-${dead}-abc`));
    mkdirSync(join(root, `memlane-ipc-${process.pid}-mine`));
    mkdirSync(join(root, "memlane-ipc-x-other"));
    expect(sweepStaleIpcDirs(root)).toEqual([join(root, `memlane-ipc-${dead}-abc`)]);
    expect(readdirSync(root).sort()).toEqual([`memlane-ipc-${process.pid}-mine`, "memlane-ipc-x-other"]);
  });

  it("an exit that skips close() (a Ctrl-C's process.exit) still removes the ipc directory", () => {
    const root = mkdtempSync(join(tmpdir(), "memlane-ipc-exit-"));
    cleanups.push(() => rmSync(root, { recursive: true, force: true }));
    const script = `import { Broker } from ${JSON.stringify(join(import.meta.dirname, "../../src/transport/broker.ts"))};
      const b = await Broker.bind({ transport: "ipc" });
      console.log(b.endpoint);
      process.exit(0);`;
    const child = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { env: { ...process.env, TMPDIR: root }, encoding: "utf8" });
    expect(child.status, child.stderr).toBe(0);
    expect(child.stdout).toContain(join(root, "memlane-ipc-")); // it did bind in root
    expect(readdirSync(root).filter((f) => f.startsWith("memlane-ipc-"))).toEqual([]);
  });

  it("refuses a non-loopback endpoint without CURVE keys", async () => {
    await expect(Broker.bind({ endpoint: "tcp://0.0.0.0:0" })).rejects.toThrow(
      /broker endpoint tcp:\/\/0\.0\.0\.0:0 is not loopback: remote endpoints require authentication; pass allowRemote/,
    );
    await expect(Broker.bind({ allowRemote: { curve: { publicKey: "short", secretKey: "x" } } })).rejects.toThrow(
      "broker option `allowRemote.curve`: expected {publicKey, secretKey}",
    );
    await expect(Broker.bind({ transport: "udp" as "tcp" })).rejects.toThrow('broker option `transport`: expected "tcp" or "ipc", got "udp"');
  });

  it("with CURVE keys, serves authorized clients and ignores the rest", async () => {
    const server = zmq.curveKeyPair();
    const client = zmq.curveKeyPair();
    const stranger = zmq.curveKeyPair();
    const b = await broker({
      endpoint: "tcp://127.0.0.1:*",
      allowRemote: { curve: { publicKey: server.publicKey, secretKey: server.secretKey, authorizedClients: [client.publicKey] } },
    });
    const curve = (k: { publicKey: string; secretKey: string }): Partial<zmq.Dealer> => ({
      curveServerKey: server.publicKey, curvePublicKey: k.publicKey, curveSecretKey: k.secretKey,
    });
    const ok = dealer(b.endpoint, curve(client));
    await ok.send([hello()]);
    expect((await reply(ok)).code).toBe(ErrorCode.UNAUTHORIZED); // heard, though no slot's key signed it
    const no = dealer(b.endpoint, { ...curve(stranger), receiveTimeout: 500 });
    await no.send([hello()]).catch(() => {});
    await expect(no.receive()).rejects.toThrow();
    // Refused at the handshake, never reaching the receive loop, yet counted: the ZAP handler
    // names the key; a client without CURVE shows in the socket's handshake events.
    const refused = b.refused();
    expect(refused.byReason.curve).toBeGreaterThanOrEqual(1);
    expect(refused.samples.find((r) => r.reason === "curve")?.text).toContain(`CURVE client key ${stranger.publicKey}`);
    no.close();
    const before = b.refused().byReason.curve!;
    const plain = dealer(b.endpoint, { receiveTimeout: 300 });
    await plain.send([hello()]).catch(() => {});
    await expect(plain.receive()).rejects.toThrow();
    expect(b.refused().byReason.curve).toBeGreaterThan(before);
  });
});

describe("the receive loop", () => {
  it("answers garbage from a raw peer and keeps serving a real worker", async () => {
    const sup = await Supervisor.start();
    cleanups.push(() => sup.close());
    const raw = dealer(sup.endpoint);
    await raw.send([Buffer.from("definitely not msgpack \xc1")]);
    expect((await reply(raw)).code).toBe(ErrorCode.MALFORMED_MESSAGE);
    await raw.send([encodeEnvelope({ v: 1, type: "task", id: "t", task: "x", args: {} })]);
    expect((await reply(raw)).message).toBe("first message must be hello, got task");
    await raw.send([]).catch(() => {});
    await raw.send([encodeEnvelope([1, 2, 3])]);
    expect((await reply(raw)).message).toBe("envelope is not a msgpack map (got an array)");
    const w = await sup.spawn(fixture("echo"));
    expect((await w.run("echo", { still: "served" })).value.args).toEqual({ still: "served" });
  });

  it("the malformed fixture gets one error reply per bad message while others are served", async () => {
    const sup = await Supervisor.start({ spawn: { heartbeatIntervalMs: 100 } });
    cleanups.push(() => sup.close());
    const [bad, good] = await Promise.all([sup.spawn(fixture("malformed")), sup.spawn(fixture("echo"))]);
    const errors = (await bad.run("report")).value.errors as { id: string; code: number; message: string }[];
    expect(errors.map((e) => e.code)).toEqual([1, 1, 1, 1, 1, 3]);
    expect(errors[0]!.message).toMatch(/^envelope is not valid msgpack/);
    expect(errors[1]!.message).toBe("envelope is not a msgpack map (got an array)");
    expect(errors[2]).toMatchObject({ id: "m-notype", message: "envelope lacks `type`" });
    expect(errors[3]).toMatchObject({ id: "m-frame", message: 'tensor "x": frame index 3 out of range (message has 1 frames)' });
    expect(errors[4]).toMatchObject({ id: "m-bytes", message: 'tensor "x": frame 0 has 8 bytes, expected 16 (shape [4] x float32)' });
    expect(errors[5]).toMatchObject({ id: "m-type", message: 'unknown message type "gossip"' });
    expect((await good.run("echo", { n: 1 })).value.args).toEqual({ n: 1 });
    expect(bad.alive).toBe(true);
  });

  it("a worker that does not prove its key is never admitted, and its hello timeout says why", async () => {
    const sup = await Supervisor.start();
    cleanups.push(() => sup.close());
    const err = await sup.spawn(fixture("echo", "no-auth", { FIXTURE_NO_AUTH: "1" }), { helloTimeoutMs: 1500 }).then(
      () => { throw new Error("admitted without auth"); },
      (e: Error & { code?: number }) => e,
    );
    expect(err.code).toBe(ErrorCode.TIMEOUT);
    expect(err.message).toMatch(/sent no hello that proves its key \(1 hello\(s\) claiming pid \d+ were refused for their auth: does it read MEMLANE_WORKER_KEY\?\) within 1500 ms/);
    expect(sup.broker.refused().byReason).toEqual({ "bad-auth": 1 });
  });

  it("refuses a hello in another version, naming both", async () => {
    const b = await broker();
    const raw = dealer(b.endpoint);
    await raw.send([hello(2)]);
    const e = await reply(raw);
    expect(e).toMatchObject({
      type: "error", code: ErrorCode.VERSION_MISMATCH, id: "raw-hello",
      message: "worker speaks protocol v2, orchestrator speaks v1", details: { worker: 2, orchestrator: 1 },
    });
  });

  it("routes a claimed peer to its handler, refuses a second hello, survives a throwing handler", async () => {
    const lines: string[] = [];
    const b = await broker({ log: (l) => lines.push(l) });
    const seen: string[] = [];
    const key = newWorkerKey();
    b.expect({
      key,
      pid: 4242,
      onHello: () => ({
        onMessage: (m) => {
          seen.push(m.type);
          if (m.id === "boom") throw new Error("handler bug");
        },
      }),
      onRefused: () => {},
    });
    const raw = dealer(b.endpoint);
    await raw.send([hello(1, 4242, key)]);
    await raw.send([encodeEnvelope({ v: 1, type: "heartbeat", id: "boom" })]);
    await raw.send([hello(1, 4242, key)]);
    expect((await reply(raw)).message).toBe("second hello from the same peer");
    await raw.send([encodeEnvelope({ v: 1, type: "progress", id: "p", current: 1, total: 1, label: "" })]);
    await raw.send([encodeEnvelope({ v: 3, type: "heartbeat", id: "old" })]);
    expect((await reply(raw)).code).toBe(ErrorCode.VERSION_MISMATCH);
    await raw.send([encodeEnvelope({ v: 1, type: "shutdown", id: "backwards" })]);
    expect(await reply(raw)).toMatchObject({ code: ErrorCode.UNKNOWN_TYPE, id: "backwards" });
    expect(seen).toEqual(["heartbeat", "progress"]);
    expect(lines.some((l) => l.includes("handler bug"))).toBe(true);
  });
});
