/**
 * The wire protocol between the orchestrator and its workers: the one definition of
 * the version, message types, error codes and phase names in TypeScript.
 * python/memlane_worker/protocol.py and native/runtime/include/memlane/protocol.h mirror it;
 * test/fixtures/golden/ holds bytes that every language's tests decode.
 * See docs/protocol.md.
 */

/** Bumped on any incompatible change; both sides refuse a peer that differs. */
export const PROTOCOL_VERSION = 1;

/**
 * The largest message (each frame, and all frames of one message together) a socket accepts
 * unless the run raises it (`maxMessageBytes`): 256 MiB holds a 128-image 224x224x3 float32
 * eval set as frames with room to spare. libzmq refuses a bigger frame from its header,
 * before allocating it, and closes that connection (ZMQ_MAXMSGSIZE).
 */
export const DEFAULT_MAX_MESSAGE_BYTES = 256 * 2 ** 20;

/**
 * Environment variables through which the orchestrator hands each worker it spawns what it
 * must know beyond argv (argv is world-readable in /proc/<pid>/cmdline; the environment is
 * readable by the same user and root only). The worker removes the key from its environment
 * once read.
 */
export const ENV_WORKER_KEY = "MEMLANE_WORKER_KEY";
export const ENV_MAX_MESSAGE_BYTES = "MEMLANE_MAX_MESSAGE_BYTES";

/**
 * A worker on another host (a rank a `memlane join` started) reaches the broker over tcp with
 * CURVE: the broker's public key, and the client keypair of the run's join key file
 * (src/transport/join-key.ts). Z85 text, 40 characters each; the worker removes the secret
 * from its environment once read, like its key.
 */
export const ENV_CURVE_SERVER_KEY = "MEMLANE_CURVE_SERVER_KEY";
export const ENV_CURVE_PUBLIC_KEY = "MEMLANE_CURVE_PUBLIC_KEY";
export const ENV_CURVE_SECRET_KEY = "MEMLANE_CURVE_SECRET_KEY";

/**
 * The pid a distributed launcher (and, set by the launcher, each of its ranks) expects as its
 * parent: it binds itself to that parent's death (PR_SET_PDEATHSIG) and then compares, so a
 * parent that died just before is noticed (python/memlane_worker/parent_death.py).
 */
export const ENV_PARENT_PID = "MEMLANE_PARENT_PID";

/**
 * The hello's `auth`: lowercase hex of HMAC-SHA256(key, HELLO_AUTH_PREFIX + id + "\n" + pid),
 * keyed with the 32 bytes the orchestrator generated for this one spawn (64 hex characters in
 * ENV_WORKER_KEY).
 */
export const HELLO_AUTH_PREFIX = "memlane-hello-v1\n";
/**
 * A distributed train stage hands its ranks one stage key (ENV_WORKER_KEY); rank r proves
 * HMAC-SHA256(stageKey, RANK_KEY_PREFIX + r) instead, so that a misnumbered or stray process
 * does not land in another rank's slot. A guard against mix-ups, not against an adversary:
 * every rank holds the stage key and can derive any rank's key (docs/distributed.md).
 */
export const RANK_KEY_PREFIX = "memlane-rank-key-v1\n";

export const MESSAGE_TYPES = [
  "hello",
  "task",
  "progress",
  "phase",
  "result",
  "error",
  "heartbeat",
  "cancel",
  "shutdown",
] as const;
export type MessageType = (typeof MESSAGE_TYPES)[number];

/** Numbered error codes. Append only: never renumber or reuse. */
export const ErrorCode = {
  MALFORMED_MESSAGE: 1,
  VERSION_MISMATCH: 2,
  UNKNOWN_TYPE: 3,
  UNKNOWN_TASK: 4,
  INVALID_ARGUMENT: 5,
  TASK_FAILED: 6,
  CANCELLED: 7,
  TIMEOUT: 8,
  WORKER_DIED: 9,
  UNSUPPORTED_OP: 10,
  PLAN_INVALID: 11,
  SHAPE_MISMATCH: 12,
  NAN_INPUT: 13,
  OUT_OF_MEMORY: 14,
  BACKEND_UNAVAILABLE: 15,
  SHM_UNAVAILABLE: 16,
  UNAUTHORIZED: 17,
} as const;
export type ErrorCodeName = keyof typeof ErrorCode;
export type ErrorCodeNumber = (typeof ErrorCode)[ErrorCodeName];

export function errorCodeName(code: number): string {
  for (const [name, value] of Object.entries(ErrorCode)) if (value === code) return name;
  return `UNKNOWN_ERROR_${code}`;
}

/**
 * Phase names, shared by every runtime so that rows line up in the report.
 * Training epochs are `epoch-<n>` (1-based).
 */
export const Phase = {
  IMPORT: "import",
  RUNTIME_CREATE: "runtime-create",
  MODEL_LOAD: "model-load",
  FIRST_INFERENCE: "first-inference",
  STEADY_INFERENCE: "steady-inference",
  DATA_LOAD: "data-load",
  CHECKPOINT_SAVE: "checkpoint-save",
  CUDA_CONTEXT: "cuda-context",
  WEIGHTS_UPLOAD: "weights-upload",
  ARENA: "arena",
  /** Distributed training: torch.distributed.init_process_group (rendezvous, gloo/NCCL buffers). */
  INIT_PROCESS_GROUP: "init-process-group",
  /** Distributed training: wrapping the model in DDP or FSDP (replicated or sharded parameters). */
  MODEL_WRAP: "model-wrap",
} as const;
export type PhaseName = (typeof Phase)[keyof typeof Phase] | `epoch-${number}`;
export const epochPhase = (n: number): PhaseName => `epoch-${n}`;

export type DType = "float32" | "float16" | "int64" | "int32" | "uint8" | "bool";
export const DTYPE_BYTES: Readonly<Record<DType, number>> = Object.freeze({
  float32: 4,
  float16: 2,
  int64: 8,
  int32: 4,
  uint8: 1,
  bool: 1,
});

/**
 * Where a tensor's bytes travel: `frame` is the index among the raw binary frames that
 * follow the envelope (0 = first frame after the envelope); `shm` names a shared-memory
 * segment instead (same host only).
 */
export interface TensorRef {
  name: string;
  dtype: DType;
  shape: number[];
  frame?: number;
  shm?: { segment: string; offset: number; length: number };
}

/** A process's own memory reading, in KiB as /proc reports it. */
export interface MemoryReading {
  rssKiB: number;
  pssKiB: number;
  ussKiB: number;
  swapKiB: number;
  hwmKiB: number;
  /** GPU memory used by this process in KiB; absent where unknown. */
  gpuKiB?: number;
  /**
   * glibc malloc's bytes in free chunks, every arena (mallinfo2 `fordblks`), in KiB: freed
   * memory malloc keeps mapped. Absent where the process cannot read it (docs/memory.md).
   */
  mallocFreeKiB?: number;
  /** glibc malloc's bytes handed out (mallinfo2 `uordblks + hblkhd`), in KiB; absent likewise. */
  mallocInUseKiB?: number;
}

/**
 * Order of the KiB counters in each SmapsSummary entry: the /proc/<pid>/smaps fields, summed
 * over the mappings of one path. The same order in Python (memory.SMAPS_FIELDS) and C++
 * (rt::kSmapsFields).
 */
export const SMAPS_FIELDS = ["Rss", "Pss", "Private_Clean", "Private_Dirty", "Anonymous", "Swap"] as const;
export type SmapsCounts = [rss: number, pss: number, privateClean: number, privateDirty: number, anonymous: number, swap: number];
/**
 * A process's /proc/self/smaps summed per path (a file, `[heap]`, `[stack]`, ...) or per
 * pseudo-name of nameless mappings: `[anon]`; `[anon guarded]` for a writable one right above
 * an inaccessible guard of at most 64 KiB (a pthread stack's layout); `[anon arena]` for a
 * writable one starting on a 64 MiB boundary and filling it, alone or with an inaccessible rest
 * (a glibc malloc arena of a non-main thread). Sent with every
 * phase end and with a task's first mark (docs/protocol.md; classified in src/memory/mapping-kinds.ts).
 */
export type SmapsSummary = Record<string, SmapsCounts>;

interface Base<T extends MessageType> {
  v: number;
  type: T;
  id: string;
}
export interface Hello extends Base<"hello"> {
  pid: number;
  /** Proof of the per-spawn key (HELLO_AUTH_PREFIX); a hello without a valid one is refused. */
  auth?: string;
  worker: string;
  capabilities: string[];
  versions: Record<string, string>;
  /** A rank of a distributed train stage (started by torch.distributed.run): who it is. */
  rank?: RankIdentity;
}
export interface RankIdentity {
  rank: number;
  localRank: number;
  worldSize: number;
  host: string;
  /** TORCHELASTIC_RESTART_COUNT: 0 for the first launch, n after n restarts of the group. */
  restart: number;
}
export interface Task extends Base<"task"> {
  task: string;
  args: Record<string, unknown>;
  tensors?: TensorRef[];
}
export interface Progress extends Base<"progress"> {
  current: number;
  total: number;
  label: string;
  metrics?: Record<string, number>;
}
export interface PhaseMark extends Base<"phase"> {
  name: PhaseName;
  mark: "start" | "end";
  /** Wall clock, ms since the epoch (same host: comparable with the orchestrator's samples). */
  tMs: number;
  memory: MemoryReading;
  /** Per-mapping summary; on every `end` mark and on a task's first mark, absent elsewhere (and from older workers). */
  smaps?: SmapsSummary;
}
export interface Result extends Base<"result"> {
  value: Record<string, unknown>;
  tensors?: TensorRef[];
}
export interface ErrorMessage extends Base<"error"> {
  code: number;
  message: string;
  details?: Record<string, unknown>;
  traceback?: string;
}
export type Heartbeat = Base<"heartbeat">;
export type Cancel = Base<"cancel">;
export type Shutdown = Base<"shutdown">;

export type Message =
  | Hello
  | Task
  | Progress
  | PhaseMark
  | Result
  | ErrorMessage
  | Heartbeat
  | Cancel
  | Shutdown;
