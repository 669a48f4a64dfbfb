/**
 * Which rank failed, read from torch.distributed.run's own failure summary (its
 * ChildFailedError message on stderr). The orchestrator is not the ranks' parent, so the
 * launcher is the one that saw the exit status; its "Root Cause" block names host, rank,
 * local rank, exit code, pid and signal:
 *
 *     Root Cause (first observed failure):
 *     [0]:
 *       time      : 2026-11-22_22:31:05
 *       host      : box
 *       rank      : 1 (local_rank: 1)
 *       exitcode  : -9 (pid: 4242)
 *       error_file: <N/A>
 *       traceback : Signal 9 (SIGKILL) received by PID 4242
 */
import { constants } from "node:os";

export interface RankFailure {
  rank: number;
  localRank: number;
  host: string;
  pid: number;
  exitCode: number;
  /** "SIGKILL" when the rank died of a signal (exit code -N), else null. */
  signal: string | null;
}

const SIGNAL_NAMES = new Map(Object.entries(constants.signals).map(([name, n]) => [n as number, name]));

/** The root-cause failure of the launcher's last summary in `stderr`, or null if it printed none. */
export function parseRootCause(stderr: string): RankFailure | null {
  const at = stderr.lastIndexOf("Root Cause");
  if (at < 0) return null;
  const block = stderr.slice(at, at + 2000);
  const host = /host\s*:\s*(\S+)/.exec(block);
  const rank = /rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)/.exec(block);
  const exit = /exitcode\s*:\s*(-?\d+)\s*\(pid:\s*(\d+)\)/.exec(block);
  if (!host || !rank || !exit) return null;
  const exitCode = Number(exit[1]);
  return {
    rank: Number(rank[1]),
    localRank: Number(rank[2]),
    host: host[1]!,
    pid: Number(exit[2]),
    exitCode,
    signal: exitCode < 0 ? (SIGNAL_NAMES.get(-exitCode) ?? `signal ${-exitCode}`) : null,
  };
}

/** "rank 1 (local rank 1) on host box, pid 4242, killed by SIGKILL" */
export function describeRankFailure(f: RankFailure): string {
  const how = f.signal ? `killed by ${f.signal}` : `exited with code ${f.exitCode}`;
  return `rank ${f.rank} (local rank ${f.localRank}) on host ${f.host}, pid ${f.pid}, ${how}`;
}
