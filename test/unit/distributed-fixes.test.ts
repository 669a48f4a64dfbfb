/**
 * The distributed stage's edges: options refused at the builder, the report's choice of which
 * ranks this host measured, and the joiner pool's waits ending with the pool.
 */
import { afterEach, describe, expect, it } from "vitest";
import { pipeline } from "../../src/pipeline/builder.ts";
import { resolveDistributed } from "../../src/pipeline/distributed/options.ts";
import { distributedReports, type DistributedRecord } from "../../src/report/distributed.ts";
import type { TrackedProcess } from "../../src/memory/sampler.ts";
import { Broker } from "../../src/transport/broker.ts";
import { RemoteNodes } from "../../src/workers/remote-nodes.ts";
import { brokerPortProblem, JOIN_CAPABILITY } from "../../src/workers/join-protocol.ts";
import * as zmq from "zeromq";
import { helloAuth } from "../../src/transport/auth.ts";
import { decodeRaw, encodeEnvelope } from "../../src/transport/codec.ts";
import { PROTOCOL_VERSION } from "../../src/transport/protocol.ts";
import { runPipeline } from "../../src/pipeline/run.ts";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const K = 1024;
const reading = (mib: number) => ({ rssKiB: mib * K, ussKiB: mib * K, pssKiB: mib * K, swapKiB: 0, hwmKiB: mib * K });

describe("distributed options", () => {
  it("refuses fsdp on several hosts: its sharded checkpoint would be split over their disks", () => {
    expect(() => resolveDistributed("t", { nproc: 1, strategy: "fsdp", nnodes: 2 })).toThrow(/distributed\.strategy: expected "ddp" with nnodes > 1 \(fsdp saves sharded/);
    expect(resolveDistributed("t", { nproc: 2, strategy: "fsdp", nnodes: 1 }).strategy).toBe("fsdp");
  });

  it("refuses a batch size the ranks cannot share evenly, naming the default when none is set", () => {
    expect(() => pipeline("p").train({ arch: "digits-cnn", batchSize: 30, distributed: { nproc: 4, strategy: "ddp" } }))
      .toThrow(/stage "train": batchSize: expected a multiple of the 4 ranks \(nproc 4 x nnodes 1\).*received 30/);
    expect(() => pipeline("p").train({ arch: "digits-cnn", distributed: { nproc: 3, strategy: "ddp" } })).toThrow(/multiple of the 3 ranks.*32 \(the default\)/);
    expect(() => pipeline("p").train({ arch: "digits-cnn", batchSize: 48, distributed: { nproc: 3, strategy: "ddp" } })).not.toThrow();
  });

  it("memlane join refuses a port or timeout that is none, naming the flag", async () => {
    const { execute } = await import("../../src/cli/commands/join.ts");
    const io = { out: () => {}, err: () => {} } as unknown as Parameters<typeof execute>[1];
    await expect(execute(["--key", "k.json", "--connect-timeout", "0", "10.0.0.1:29500"], io)).rejects.toThrow(/--connect-timeout: expected a positive integer, received "0"/);
    await expect(execute(["--key", "k.json", "--broker-port", "0", "10.0.0.1:29500"], io)).rejects.toThrow(/--broker-port: expected a positive integer, received "0"/);
    await expect(execute(["--key", "k.json", "--broker-port", "70000", "10.0.0.1:29500"], io)).rejects.toThrow(/--broker-port: expected a port in 1\.\.65535, received "70000"/);
    await expect(execute(["--key", "k.json", "10.0.0.1:65535"], io)).rejects.toThrow(/--broker-port: .*would be 65536/);
  });

  it("checks given and derived broker ports", () => {
    expect(brokerPortProblem(0, 29500)?.option).toBe("--broker-port");
    expect(brokerPortProblem(-3, 29500)?.received).toBe("-3");
    expect(brokerPortProblem(65536, 29500)).toBeDefined();
    expect(brokerPortProblem(undefined, 65535)?.expected).toMatch(/would be 65536/);
    expect(brokerPortProblem(undefined, 29500)).toBeUndefined();
    expect(brokerPortProblem(65535, 65535)).toBeUndefined();
  });
});

describe("remote run", () => {
  it("refuses --rdzv-endpoint for a pipeline with no stage on other hosts, before binding or writing anything", async () => {
    const dir = mkdtempSync(join(tmpdir(), "memlane-rdzv-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const outDir = join(dir, "runs");
    const p = pipeline("p").train({ arch: "digits-cnn", distributed: { nproc: 2, strategy: "ddp" } });
    await expect(runPipeline(p, { outDir, quiet: true, remote: { rdzvEndpoint: "127.0.0.1:29500" } }))
      .rejects.toThrow(/remote\.rdzvEndpoint: expected a pipeline with a train stage of distributed\.nnodes > 1/);
    expect(existsSync(outDir) ? readdirSync(outDir) : []).toEqual([]); // no run directory, no key file
  });
});

describe("distributed report", () => {
  it("gives a rank the sampler's samples only when this host's launcher started it (a remote pid may equal a local one)", () => {
    const pid = 4242;
    const marks = [
      { name: "train", mark: "start" as const, tMs: 1000, memory: reading(100) },
      { name: "train", mark: "end" as const, tMs: 2000, memory: reading(100) },
    ];
    const tracks: TrackedProcess[] = [{ label: "other", pid, periodMs: 50, exited: true, samples: [{ tMs: 1500, ...reading(900), gpuKiB: null }] }];
    const rank = (r: number, local: boolean) => ({ rank: r, pid, host: local ? "here" : "there", local, marks, accuracy: 0.9, tensorBytes: null });
    const record: DistributedRecord = {
      stage: "t", arch: "digits-cnn", strategy: "ddp", backend: "gloo", nproc: 1, nnodes: 2,
      launcher: { pid: 1, command: [] }, restarts: 0, note: null, ranks: [rank(0, true), rank(1, false)],
    };
    const [d] = distributedReports([record], tracks, false, null);
    const peak = (r: number) => Math.max(...d!.ranks[r]!.phases.map((p) => p.peakRssMiB));
    expect(peak(0)).toBe(900); // the local rank: its own sample
    expect(peak(1)).toBe(100); // the remote rank: its marks only, not the local process of the same pid
  });
});

describe("joiner pool", () => {
  it("fails a stage still waiting for hosts when the pool closes, and refuses new waits after", async () => {
    const broker = await Broker.bind({ transport: "ipc" });
    cleanups.push(() => broker.close());
    const nodes = new RemoteNodes(broker, new Uint8Array(32).fill(1), 1, { log: () => {} });
    const waiting = nodes.take(1, 60_000);
    await nodes.close();
    await expect(waiting).rejects.toThrow(/closed while a stage waited for hosts to join/);
    await expect(nodes.take(1, 60_000)).rejects.toThrow(/closed/);
  });

  it("ends a wait when its stage's signal aborts", async () => {
    const broker = await Broker.bind({ transport: "ipc" });
    cleanups.push(() => broker.close());
    const nodes = new RemoteNodes(broker, new Uint8Array(32).fill(1), 1, { log: () => {} });
    cleanups.push(() => nodes.close());
    const ac = new AbortController();
    const waiting = nodes.take(1, 60_000, ac.signal);
    ac.abort(new Error("stage ended"));
    await expect(waiting).rejects.toThrow("stage ended");
  });

  /** A raw joiner: proves the join secret, with or without the join capability. */
  async function joiner(endpoint: string, secret: Uint8Array, pid: number, capable: boolean) {
    const d = new zmq.Dealer({ linger: 0, receiveTimeout: 5000 });
    d.connect(endpoint);
    cleanups.push(() => d.close());
    const id = `hello-${pid}`;
    await d.send(encodeEnvelope({
      v: PROTOCOL_VERSION, type: "hello", id, pid, worker: "memlane join", host: `host-${pid}`, versions: {},
      capabilities: capable ? [JOIN_CAPABILITY] : [], auth: helloAuth(secret, id, pid),
    }));
    const next = async (): Promise<{ type: string; id: string }> => {
      for (;;) {
        const m = decodeRaw((await d.receive())[0]!) as { type: string; id: string };
        if (m.type !== "heartbeat") return m;
      }
    };
    return { d, next };
  }

  it("keeps the slot of a peer that proved the join secret without being a joiner open for a real one", async () => {
    const broker = await Broker.bind({ transport: "ipc" });
    cleanups.push(() => broker.close());
    const secret = new Uint8Array(32).fill(2);
    const nodes = new RemoteNodes(broker, secret, 1, { log: () => {} });
    cleanups.push(() => nodes.close());
    const stray = await joiner(broker.endpoint, secret, 300, false);
    expect((await stray.next()).type).toBe("error");
    const real = await joiner(broker.endpoint, secret, 301, true);
    const [node] = await nodes.take(1, 5000);
    expect(node!.pid).toBe(301);
    void real;
  });

  it("gives up a node whose joiner answers no cancel: it may still run that launcher", async () => {
    const broker = await Broker.bind({ transport: "ipc" });
    cleanups.push(() => broker.close());
    const secret = new Uint8Array(32).fill(3);
    const nodes = new RemoteNodes(broker, secret, 1, { log: () => {}, stopTimeoutMs: 200 });
    cleanups.push(() => nodes.close());
    const silent = await joiner(broker.endpoint, secret, 400, true);
    const [node] = await nodes.take(1, 5000);
    const launch = node!.launch({ stage: "t", stageKey: "ab".repeat(32), nproc: 1, nnodes: 2, nodeRank: 1, rdzvId: "r", maxRestarts: 0, maxMessageBytes: 2 ** 20, env: {} });
    expect((await silent.next()).type).toBe("task");
    const exit = await launch.stop(); // the joiner never answers the cancel
    expect(exit.stderrTail).toMatch(/did not report its launcher's end within 200 ms of a cancel/);
    expect(node!.alive).toBe(false);
    expect(nodes.connected).toBe(0);
    expect((await silent.next()).type).toBe("cancel");
    expect((await silent.next()).type).toBe("shutdown"); // told to exit, never handed out again
  });
});
