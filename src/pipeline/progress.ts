/**
 * Progress on the terminal: one bar per running stage (training epochs, benchmark phases)
 * when stdout is a TTY; plain lines otherwise (logs, CI).
 */
import type { Io } from "../cli/io.ts";

export interface ProgressSink {
  stageStart(stage: string, what: string): void;
  /** current/total of a stage (epochs, phases); `label` e.g. "epoch 3/8 acc 0.97". */
  update(stage: string, current: number, total: number, label: string): void;
  stageEnd(stage: string, summary: string, failed?: boolean): void;
  log(line: string): void;
  close(): void;
}

function bar(current: number, total: number, width: number): string {
  const f = total > 0 ? Math.min(1, current / total) : 0;
  const full = Math.round(f * width);
  return `[${"#".repeat(full)}${"-".repeat(width - full)}]`;
}

const fmtMs = (ms: number): string => (ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`);

export function createProgress(io: Io, quiet = false): ProgressSink {
  const started = new Map<string, number>();
  const bars = new Map<string, string>();
  let lastPlain = new Map<string, string>();
  let drawn = "";
  // Redrawn on every change, and after any plain line (which clears the bar line).
  const draw = (force = false): void => {
    if (!io.isTTY || quiet || bars.size === 0) return;
    const line = [...bars.values()].join("  ").slice(0, Math.max(20, io.columns - 1));
    if (line === drawn && !force) return;
    drawn = line;
    io.redraw(line);
  };
  return {
    stageStart(stage, what) {
      started.set(stage, Date.now());
      if (quiet) return;
      io.out(`▶ ${stage} (${what})`);
      if (io.isTTY) bars.set(stage, `${stage} ${bar(0, 1, 20)}`);
      draw(true);
    },
    update(stage, current, total, label) {
      if (quiet) return;
      if (io.isTTY) {
        bars.set(stage, `${stage} ${bar(current, total, 20)} ${label}`);
        draw();
      } else {
        const line = `  ${stage}: ${label}`;
        if (lastPlain.get(stage) !== line) io.out(line);
        lastPlain.set(stage, line);
      }
    },
    stageEnd(stage, summary, failed = false) {
      bars.delete(stage);
      const ms = Date.now() - (started.get(stage) ?? Date.now());
      if (!quiet || failed) io.out(`${failed ? "✗" : "✓"} ${stage} ${fmtMs(ms)}${summary ? ` — ${summary}` : ""}`);
      draw(true);
    },
    log(line) {
      if (!quiet) io.out(line);
      draw(true);
    },
    close() {
      bars.clear();
      lastPlain = new Map();
    },
  };
}
