/**
 * The broker's bounded log of refused messages: exact counts by reason, the first few of
 * each reason kept (and logged) in full, then one log line per power of ten, so a flood of
 * ten thousand forged hellos costs a handful of lines and a fixed amount of memory.
 */

/** Why the broker refused a message (docs/protocol.md, "Refused messages"). */
export type RefusalReason =
  | "malformed" // not a valid envelope, unknown type, wrong direction, a second hello
  | "unknown-peer" // anything but a hello from a peer that has not been admitted
  | "bad-auth" // a hello whose `auth` no waiting worker's key verifies
  | "version" // another protocol version
  | "oversized" // a message over the limit (all its frames together)
  | "dropped" // an admitted worker's connection closed by the transport while it lived
  | "curve"; // remote mode: a connection whose CURVE handshake failed (a key not admitted, no CURVE, another server key)

export const REFUSAL_REASONS: readonly RefusalReason[] = ["malformed", "unknown-peer", "bad-auth", "version", "oversized", "dropped", "curve"];

export interface Refusal {
  tMs: number;
  reason: RefusalReason;
  /** The peer's ROUTER identity, hex. */
  peer: string;
  text: string;
}

/** What the report's notes show. */
export interface RefusalSummary {
  total: number;
  byReason: Partial<Record<RefusalReason, number>>;
  /** The first {@link KEEP_PER_REASON} refusals of each reason, oldest first. */
  samples: Refusal[];
}

const KEEP_PER_REASON = 5;
/** Characters of a refusal's text kept and logged. */
const MAX_TEXT = 300;

export class RefusalLog {
  private readonly counts = new Map<RefusalReason, number>();
  private readonly kept: Refusal[] = [];
  private total = 0;

  constructor(private readonly log: (line: string) => void) {}

  add(reason: RefusalReason, peer: string, rawText: string): void {
    // The text quotes what a peer sent (names, ids): bounded, and no control characters reach a terminal.
    const text = rawText.length > MAX_TEXT ? `${rawText.slice(0, MAX_TEXT)}…` : rawText;
    const clean = text.replace(/[\u0000-\u001f\u007f-\u009f]/g, "?");
    this.record(reason, peer, clean);
  }

  private record(reason: RefusalReason, peer: string, text: string): void {
    const n = (this.counts.get(reason) ?? 0) + 1;
    this.counts.set(reason, n);
    this.total++;
    if (n <= KEEP_PER_REASON) {
      this.kept.push({ tMs: Date.now(), reason, peer, text });
      this.log(`broker: refused (${reason}) a message from peer ${peer}: ${text}`);
    } else if (isPowerOfTen(n)) {
      this.log(`broker: ${n} messages refused as ${reason} so far (only the first ${KEEP_PER_REASON} are logged in full)`);
    }
  }

  count(reason?: RefusalReason): number {
    return reason === undefined ? this.total : (this.counts.get(reason) ?? 0);
  }

  summary(): RefusalSummary {
    const byReason: RefusalSummary["byReason"] = {};
    for (const r of REFUSAL_REASONS) if (this.counts.has(r)) byReason[r] = this.counts.get(r)!;
    return { total: this.total, byReason, samples: [...this.kept] };
  }
}

/** One line for the run's notes, or undefined when nothing was refused. */
export function describeRefusals(s: RefusalSummary): string | undefined {
  if (s.total === 0) return undefined;
  const parts = REFUSAL_REASONS.filter((r) => s.byReason[r]).map((r) => `${s.byReason[r]} ${r}`);
  const first = s.samples[0];
  return `transport: ${s.total} message(s) refused (${parts.join(", ")})` + (first ? `; first: ${first.text}` : "");
}

/**
 * A peer that is not admitted gets at most PER_PEER error replies; later refusals are counted,
 * not answered. A stranger that never reads would otherwise fill its pipe, and with
 * `mandatory` every send queued behind a full pipe waits the broker's send timeout: a flood of
 * unread replies would stall the heartbeats and tasks of real workers.
 */
export class ReplyBudget {
  /** Well under libzmq's default send high-water mark (1000 messages a pipe). */
  static readonly PER_PEER = 100;
  /** Peers tracked at most; the oldest is forgotten beyond this. */
  static readonly TRACKED = 4096;
  private readonly sent = new Map<string, number>();

  /** True (and counted) while `peer` may still get a reply. */
  take(peer: string): boolean {
    const n = (this.sent.get(peer) ?? 0) + 1;
    if (n > ReplyBudget.PER_PEER) return false;
    this.sent.set(peer, n);
    if (this.sent.size > ReplyBudget.TRACKED) this.sent.delete(this.sent.keys().next().value!);
    return true;
  }
}

function isPowerOfTen(n: number): boolean {
  for (let p = 10; p <= n; p *= 10) if (p === n) return true;
  return false;
}

/** Several brokers' refusals as one (a run that bound a second broker for a wide message limit). */
export function mergeRefusals(summaries: readonly RefusalSummary[]): RefusalSummary {
  const byReason: Partial<Record<RefusalReason, number>> = {};
  for (const s of summaries) for (const [k, n] of Object.entries(s.byReason) as [RefusalReason, number][]) byReason[k] = (byReason[k] ?? 0) + n;
  return {
    total: summaries.reduce((a, s) => a + s.total, 0),
    byReason,
    samples: summaries.flatMap((s) => s.samples).sort((a, b) => a.tMs - b.tMs),
  };
}
