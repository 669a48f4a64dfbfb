/**
 * `memlane join` against a remote-mode broker: a joiner whose key file is not the
 * orchestrator's is refused at the CURVE handshake (and counted), one with the right CURVE
 * keys but another join secret is refused at its hello, and each exits 1 saying why.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Broker } from "../../src/transport/broker.ts";
import { loadOrCreateJoinKey } from "../../src/transport/join-key.ts";
import { startCli } from "./pipeline-helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "memlane-join-"));
const cleanups: (() => Promise<unknown> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  rmSync(dir, { recursive: true, force: true });
});

async function remoteBroker(keyFile: string): Promise<{ broker: Broker; port: number }> {
  const { key } = loadOrCreateJoinKey(keyFile);
  const broker = await Broker.bind({
    endpoint: "tcp://127.0.0.1:*",
    allowRemote: { curve: { ...key.server, authorizedClients: [key.client.publicKey] } },
  });
  cleanups.push(() => broker.close());
  return { broker, port: Number(/:(\d+)$/.exec(broker.endpoint)![1]) };
}

function join_(keyFile: string, port: number) {
  return startCli(["join", "--key", keyFile, "--broker-port", String(port), "--connect-timeout", "20", "127.0.0.1:1"]);
}

describe("memlane join refused", () => {
  it("with another key file: the CURVE handshake fails, is counted, and the joiner exits 1", async () => {
    const { broker, port } = await remoteBroker(join(dir, "orchestrator.json"));
    const strangerFile = join(dir, "stranger.json");
    loadOrCreateJoinKey(strangerFile);
    const cli = join_(strangerFile, port);
    const { code } = await cli.exit;
    expect(code, cli.stderr()).toBe(1);
    expect(cli.stderr()).toMatch(/the orchestrator at tcp:\/\/127\.0\.0\.1:\d+ refused this host's CURVE handshake .*is the key file the one the orchestrator wrote\?/);
    expect(broker.refused().byReason.curve).toBeGreaterThanOrEqual(1);
  }, 30_000);

  it("with the right CURVE keys but another join secret: its hello is refused (bad-auth)", async () => {
    const file = join(dir, "a.json");
    const { broker, port } = await remoteBroker(file);
    // The same CURVE keys, another joinSecret: only the hello's proof can tell.
    const forged = join(dir, "forged.json");
    const text = readFileSync(file, "utf8").replace(/"joinSecret": "[0-9a-f]{64}"/, `"joinSecret": "${"ab".repeat(32)}"`);
    writeFileSync(forged, text, { mode: 0o600 });
    const cli = join_(forged, port);
    const { code } = await cli.exit;
    expect(code, cli.stderr()).toBe(1);
    expect(cli.stderr()).toMatch(/refused by the orchestrator: hello refused: it has an auth that no waiting worker's key verifies/);
    expect(broker.refused().byReason).toEqual({ "bad-auth": 1 });
  }, 30_000);
});
