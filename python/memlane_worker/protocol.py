"""The wire protocol, mirrored from src/transport/protocol.ts (the reference definition).

One definition per language: the version, message types, error codes and phase names
live here for Python. test/fixtures/golden/ holds bytes that the TypeScript and Python
tests both decode. See docs/protocol.md.
"""

PROTOCOL_VERSION = 1

# The largest message (each frame, and all frames of one message together) unless the run
# raises it; the orchestrator passes the run's limit in ENV_MAX_MESSAGE_BYTES.
DEFAULT_MAX_MESSAGE_BYTES = 256 * 2**20

# What the orchestrator hands a spawned worker beyond argv (argv is world-readable in
# /proc/<pid>/cmdline; the environment only to the same user and root).
ENV_WORKER_KEY = "MEMLANE_WORKER_KEY"
ENV_MAX_MESSAGE_BYTES = "MEMLANE_MAX_MESSAGE_BYTES"

# A worker on another host reaches the broker over tcp with CURVE: the broker's public key
# and the run's client keypair (Z85, 40 characters each; the secret is removed once read).
ENV_CURVE_SERVER_KEY = "MEMLANE_CURVE_SERVER_KEY"
ENV_CURVE_PUBLIC_KEY = "MEMLANE_CURVE_PUBLIC_KEY"
ENV_CURVE_SECRET_KEY = "MEMLANE_CURVE_SECRET_KEY"

# The pid a distributed launcher (and, set by the launcher, each rank) expects as its parent:
# bound to its death with PR_SET_PDEATHSIG, then compared (parent_death.py).
ENV_PARENT_PID = "MEMLANE_PARENT_PID"

# hello.auth = hex HMAC-SHA256(key, HELLO_AUTH_PREFIX + id + "\n" + str(pid)).
HELLO_AUTH_PREFIX = "memlane-hello-v1\n"
# A distributed train stage's ranks share one stage key; rank r proves
# HMAC-SHA256(stage_key, RANK_KEY_PREFIX + str(r)) instead (docs/distributed.md).
RANK_KEY_PREFIX = "memlane-rank-key-v1\n"

MESSAGE_TYPES = (
    "hello",
    "task",
    "progress",
    "phase",
    "result",
    "error",
    "heartbeat",
    "cancel",
    "shutdown",
)


class ErrorCode:
    """Numbered error codes. Append only: never renumber or reuse."""

    MALFORMED_MESSAGE = 1
    VERSION_MISMATCH = 2
    UNKNOWN_TYPE = 3
    UNKNOWN_TASK = 4
    INVALID_ARGUMENT = 5
    TASK_FAILED = 6
    CANCELLED = 7
    TIMEOUT = 8
    WORKER_DIED = 9
    UNSUPPORTED_OP = 10
    PLAN_INVALID = 11
    SHAPE_MISMATCH = 12
    NAN_INPUT = 13
    OUT_OF_MEMORY = 14
    BACKEND_UNAVAILABLE = 15
    SHM_UNAVAILABLE = 16
    UNAUTHORIZED = 17


class Phase:
    """Phase names shared by every runtime; training epochs are ``epoch-<n>`` (1-based)."""

    IMPORT = "import"
    RUNTIME_CREATE = "runtime-create"
    MODEL_LOAD = "model-load"
    FIRST_INFERENCE = "first-inference"
    STEADY_INFERENCE = "steady-inference"
    DATA_LOAD = "data-load"
    CHECKPOINT_SAVE = "checkpoint-save"
    CUDA_CONTEXT = "cuda-context"
    WEIGHTS_UPLOAD = "weights-upload"
    ARENA = "arena"
    INIT_PROCESS_GROUP = "init-process-group"
    MODEL_WRAP = "model-wrap"

    @staticmethod
    def epoch(n: int) -> str:
        return f"epoch-{n}"


DTYPE_BYTES = {"float32": 4, "float16": 2, "int64": 8, "int32": 4, "uint8": 1, "bool": 1}


def error_code_name(code: int) -> str:
    """The name of a numbered error code, as errorCodeName() in protocol.ts."""
    for name, value in vars(ErrorCode).items():
        if not name.startswith("_") and value == code:
            return name
    return f"UNKNOWN_ERROR_{code}"
