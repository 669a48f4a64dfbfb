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

async function setup(worldSize: number) {
  const broker = await Broker.bind({ transport: "ipc" });
  cleanups.push(() => broker.close());
  const stageKey = newWorkerKey();
  const admitted: number[] = [];
  const slots = new RankSlots(broker, { stage: "t", stageKey, worldSize, task: "train.rank", args: {}, onAdmit: (_r, pid) => admitted.push(pid) });
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

  it("fails the stage and gives no task to a process that proves rank 0's key but claims another rank", async () => {
    const { broker, stageKey, slots, admitted } = await setup(2);
    const liar = await rank(broker.endpoint, stageKey, 0, 200, who(0, 1, 2));
    expect(liar.first.type).toBe("shutdown");
    await expect(slots.done).rejects.toThrow(/proving rank 0's key says it is rank 1 of 2 \(expected 0 of 2\)/);
    expect(admitted).toEqual([]);
    expect(slots.admitted()).toEqual([]);
  });
});
