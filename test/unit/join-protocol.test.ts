import { describe, expect, it } from "vitest";
import { firstLauncherExit, type HostExit } from "../../src/pipeline/distributed/multi-host.ts";
import { checkJoinLaunchArgs, parseHostPort } from "../../src/workers/join-protocol.ts";
import type { RemoteLauncher } from "../../src/workers/remote-nodes.ts";

const ARGS = { stage: "train", stageKey: "ab".repeat(32), nproc: 1, nnodes: 2, nodeRank: 1, rdzvId: "run-train", maxRestarts: 0, maxMessageBytes: 2 ** 20, env: { OMP_NUM_THREADS: "1" } };

describe("join protocol", () => {
  it("checks a launch task's args, naming the field", () => {
    expect(checkJoinLaunchArgs(ARGS)).toEqual(ARGS);
    expect(() => checkJoinLaunchArgs({ ...ARGS, stageKey: "xyz" })).toThrow('join.launch: `stageKey` is "xyz"');
    expect(() => checkJoinLaunchArgs({ ...ARGS, nodeRank: 2 })).toThrow("join.launch: `nodeRank` 2 is not below nnodes 2");
    expect(() => checkJoinLaunchArgs({ ...ARGS, nnodes: 1, nodeRank: 0 })).toThrow("`nnodes` must be an integer >= 2");
    expect(() => checkJoinLaunchArgs({ ...ARGS, stage: "a b;rm" })).toThrow("`stage`");
    // The joiner sets its MEMLANE_ variables (keys) itself: the orchestrator cannot override them.
    expect(() => checkJoinLaunchArgs({ ...ARGS, env: { MEMLANE_CURVE_SERVER_KEY: "x" } })).toThrow("`env.MEMLANE_CURVE_SERVER_KEY`: the joiner sets MEMLANE_ variables itself");
    expect(() => checkJoinLaunchArgs({ ...ARGS, env: { "A=B": "x" } })).toThrow("`env.A=B` must be a string variable");
    // Only thread counts and the collectives' network settings: nothing that runs code of the orchestrator's choosing.
    for (const name of ["LD_PRELOAD", "PATH", "PYTHONSTARTUP", "PYTHONPATH"])
      expect(() => checkJoinLaunchArgs({ ...ARGS, env: { [name]: "x" } })).toThrow(`\`env.${name}\`: not a variable a joined host accepts`);
    expect(checkJoinLaunchArgs({ ...ARGS, env: { NCCL_DEBUG: "INFO", GLOO_SOCKET_IFNAME: "eth0", MKL_NUM_THREADS: "2" } }).env).toEqual({ NCCL_DEBUG: "INFO", GLOO_SOCKET_IFNAME: "eth0", MKL_NUM_THREADS: "2" });
  });

  it("parses host:port, naming the option", () => {
    expect(parseHostPort("10.0.0.1:29500", "--rdzv-endpoint")).toEqual({ host: "10.0.0.1", port: 29500 });
    expect(parseHostPort("[fd00::1]:1", "x")).toEqual({ host: "[fd00::1]", port: 1 });
    expect(parseHostPort("node-a.example:80", "x").host).toBe("node-a.example");
    for (const bad of ["10.0.0.1", "host:0", "host:70000", ":29500", "tcp://h:1"])
      expect(() => parseHostPort(bad, "--rdzv-endpoint")).toThrow(`--rdzv-endpoint: expected host:port (e.g. 10.0.0.1:29500), received ${JSON.stringify(bad)}`);
  });
});

describe("the root cause among several hosts' launchers", () => {
  const exit = (host: string, signal: string | null, exitCode = 1): HostExit => ({
    host, exitCode: 1, signal: undefined, stderrTail: "",
    failure: { rank: host === "a" ? 0 : 1, localRank: 0, host, pid: 7, exitCode: signal ? -9 : exitCode, signal },
  });
  const later = (e: HostExit, ms: number): RemoteLauncher => ({
    host: e.host, pid: 1, exited: new Promise((r) => setTimeout(() => r(e), ms)), stop: async () => e,
  });

  it("a rank killed by a signal on another host wins over the first launcher's echo failure", async () => {
    const t0 = Date.now();
    const picked = await firstLauncherExit(Promise.resolve(exit("a", null)), [later(exit("b", "SIGKILL"), 300)]);
    expect(picked.host).toBe("b");
    expect(picked.failure?.signal).toBe("SIGKILL");
    expect(Date.now() - t0).toBeLessThan(2000); // it answers once the killed rank is named, not at the deadline
  });

  it("without a signal anywhere, the first failure once all have ended", async () => {
    const picked = await firstLauncherExit(Promise.resolve(exit("a", null, 3)), [later(exit("b", null, 1), 50)]);
    expect([picked.host, picked.failure?.exitCode]).toEqual(["a", 3]);
  });
});
