/** `memlane join --key FILE <host:port>`: start this host's ranks of a multi-host run (docs/distributed.md). */
import { type CommandSpec, parseArgs, UsageError, usage } from "../args.ts";
import type { Io } from "../io.ts";
import { brokerPortProblem, parseHostPort } from "../../workers/join-protocol.ts";

export const spec: CommandSpec = {
  name: "join",
  summary: "Join a multi-host run: connect to the orchestrator of `memlane run --rdzv-endpoint host:port` (CURVE) and start this host's ranks when its distributed stage starts.",
  positionals: [{ name: "endpoint", description: "the orchestrator's rendezvous endpoint host:port, as this host reaches it" }],
  flags: {
    key: { type: "string", placeholder: "FILE", description: "the join key file the orchestrator wrote (copied here, mode 600)" },
    "broker-port": { type: "int", placeholder: "PORT", description: "the orchestrator's broker port (default: the rendezvous port + 1)" },
    "connect-timeout": { type: "int", placeholder: "S", description: "give up when the orchestrator has not answered within S seconds", default: 120 },
  },
};

export async function execute(argv: readonly string[], io: Io): Promise<number> {
  const args = parseArgs(spec, argv);
  if (args.help) {
    io.out(usage(spec));
    return 0;
  }
  const endpoint = args.positionals.endpoint!;
  try {
    parseHostPort(endpoint, "<endpoint>");
  } catch (err) {
    throw new UsageError((err as Error).message, "<endpoint>");
  }
  const keyFile = args.flags.key as string | undefined;
  if (keyFile === undefined) throw new UsageError("--key: the join key file is required (the orchestrator prints where it wrote it)", "--key");
  const port = args.flags["broker-port"] as number | undefined;
  const bad = brokerPortProblem(port, parseHostPort(endpoint, "<endpoint>").port);
  if (bad) throw UsageError.bad(bad.option, bad.expected, bad.received);
  const timeoutS = args.flags["connect-timeout"] as number;
  if (!(Number.isInteger(timeoutS) && timeoutS >= 1)) throw UsageError.bad("--connect-timeout", "a whole number of seconds >= 1", String(timeoutS));
  const { runJoiner } = await import("../../workers/joiner.ts");
  return runJoiner({
    keyFile, endpoint, log: io.err,
    ...(port !== undefined ? { brokerPort: port } : {}),
    connectTimeoutMs: timeoutS * 1000,
  });
}
