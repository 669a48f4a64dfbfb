/**
 * RankSlots on a real broker with raw ZeroMQ peers: which hellos take a rank's slot. A late
 * hello of a generation the launcher already restarted, or one claiming another rank, gets a
 * shutdown and no task.
 */
import { afterEach, describe, expect, it } from "vitest";
import * as zmq from "zeromq";
import { RankSlots } from "../../src/pipeline/distributed/ranks.ts";
import { helloAuth, newWorkerKey, rankKey } from "../../src/transport/auth.ts";
import { Broker } from "../../src/transport/broker.ts";
import { decodeRaw, encodeEnvelope } from "../../src/transport/codec.ts";
import { PROTOCOL_VERSION, type RankIdentity } from "../../src/transport/protocol.ts";

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(worldSize: number, restarts: { maxRestarts?: number; restartWaitMs?: number } = {}) {
  const broker = await Broker.bind({ transport: "ipc" });
  cleanups.push(() => broker.close());
  const stageKey = newWorkerKey();
  const admitted: number[] = [];
  const slots = new RankSlots(broker, { stage: "t", stageKey, worldSize, task: "train.rank", args: {}, onAdmit: (_r, pid) => admitted.push(pid), ...restarts });
  cleanups.push(() => slots.close());
  return { broker, stageKey, slots, admitted };
}

/** A rank's raw socket: says hello proving rank `keyRank`'s key with `identity`, returns the first reply's type. */
async function rank(endpoint: string, stageKey: Uint8Array, keyRank: number, pid: number, identity: RankIdentity) {
  const d = new zmq.Dealer({ linger: 0, receiveTimeout: 5000 });
  d.connect(endpoint);
  cleanups.push(() => d.close());
  const id = `hello-${pid}`;
  await d.send(encodeEnvelope({
    v: PROTOCOL_VERSION, type: "hello", id, pid, worker: `t@rank${identity.rank}`, capabilities: [], versions: {},
    auth: helloAuth(rankKey(stageKey, keyRank), id, pid), rank: identity,
  }));
  const next = async (): Promise<{ type: string; id: string }> => {
    for (;;) {
      const [env] = await d.receive();
      const m = decodeRaw(env!) as { type: string; id: string };
      if (m.type !== "heartbeat") return m;
    }
  };
  return { d, first: await next(), next };
}

const who = (restart: number, r = 0, worldSize = 1): RankIdentity => ({ rank: r, localRank: r, worldSize, host: "h", restart });

describe("rank slots", () => {
  it("turns away a late hello of an older generation: shutdown, no task, the current rank keeps its slot", async () => {
    const { broker, stageKey, slots, admitted } = await setup(1);
    const current = await rank(broker.endpoint, stageKey, 0, 101, who(1));
    expect(current.first.type).toBe("task");
    const late = await rank(broker.endpoint, stageKey, 0, 100, who(0));
    expect(late.first.type).toBe("shutdown");
    expect(admitted).toEqual([101]);
    expect(slots.admitted()).toEqual([{ rank: 0, pid: 101, host: "h" }]);
    await current.d.send(encodeEnvelope({ v: PROTOCOL_VERSION, type: "result", id: current.first.id, value: { accuracy: 1 } }));
    const runs = await slots.done;
    expect(runs.map((r) => r.pid)).toEqual([101]);
  });

  it("with a restart left, a rank's task error waits: the restarted group's hello voids it", async () => {
    const { broker, stageKey, slots } = await setup(1, { maxRestarts: 1, restartWaitMs: 60_000 });
    const first = await rank(broker.endpoint, stageKey, 0, 300, who(0));
    // The echo of a killed peer: gloo's collective broke under this rank.
    await first.d.send(encodeEnvelope({ v: PROTOCOL_VERSION, type: "error", id: first.first.id, code: 1, message: "Connection closed by peer" }));
    let settled = false;
    void slots.done.then(() => (settled = true), () => (settled = true));
    await new Promise((r) => setTimeout(r, 300));
    expect(settled).toBe(false);
    const restarted = await rank(broker.endpoint, stageKey, 0, 301, who(1));
    expect(restarted.first.type).toBe("task");
    await restarted.d.send(encodeEnvelope({ v: PROTOCOL_VERSION, type: "result", id: restarted.first.id, value: { accuracy: 1 } }));
    expect((await slots.done).map((r) => r.pid)).toEqual([301]);
  });

  it("a held task error fails the stage when no restarted group comes in time, and at once when no restart is left", async () => {
    const held = await setup(1, { maxRestarts: 1, restartWaitMs: 200 });
    const a = await rank(held.broker.endpoint, held.stageKey, 0, 400, who(0));
    await a.d.send(encodeEnvelope({ v: PROTOCOL_VERSION, type: "error", id: a.first.id, code: 1, message: "boom" }));
    await expect(held.slots.done).rejects.toThrow(/rank 0 .*pid 400\) failed: .*boom/);
    const last = await setup(1, { maxRestarts: 1, restartWaitMs: 60_000 });
    const b = await rank(last.broker.endpoint, last.stageKey, 0, 401, who(1)); // generation 1 = the last restart
    await b.d.send(encodeEnvelope({ v: PROTOCOL_VERSION, type: "error", id: b.first.id, code: 1, message: "again" }));
    await expect(last.slots.done).rejects.toThrow(/again/);
  });

  it("fails the stage and gives no task to a process that proves rank 0's key but claims another rank", async () => {
    const { broker, stageKey, slots, admitted } = await setup(2);
    const liar = await rank(broker.endpoint, stageKey, 0, 200, who(0, 1, 2));
    expect(liar.first.type).toBe("shutdown");
    await expect(slots.done).rejects.toThrow(/proving rank 0's key says it is rank 1 of 2 \(expected 0 of 2\)/);
    expect(admitted).toEqual([]);
    expect(slots.admitted()).toEqual([]);
  });
});
