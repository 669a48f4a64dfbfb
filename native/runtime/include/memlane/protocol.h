// The wire protocol in C++: version, message types, error codes and phase names, mirrored
// from src/transport/protocol.ts (the reference) and docs/protocol.md. Defined once here.
#pragma once

#include <cstdint>

namespace memlane::protocol {

// Bumped on any incompatible change; both sides refuse a peer that differs.
inline constexpr int kVersion = 1;

// The largest message (each frame, and all frames of one message together) unless the run
// raises it: the orchestrator passes the run's limit in kEnvMaxMessageBytes.
inline constexpr int64_t kDefaultMaxMessageBytes = int64_t(256) << 20;

// What the orchestrator hands a spawned worker beyond argv (argv is world-readable in
// /proc/<pid>/cmdline; the environment only to the same user and root).
inline constexpr const char* kEnvWorkerKey = "MEMLANE_WORKER_KEY";
inline constexpr const char* kEnvMaxMessageBytes = "MEMLANE_MAX_MESSAGE_BYTES";

// hello.auth = hex HMAC-SHA256(key, kHelloAuthPrefix + id + "\n" + pid).
inline constexpr const char* kHelloAuthPrefix = "memlane-hello-v1\n";

namespace type {
inline constexpr const char* kHello = "hello";
inline constexpr const char* kTask = "task";
inline constexpr const char* kProgress = "progress";
inline constexpr const char* kPhase = "phase";
inline constexpr const char* kResult = "result";
inline constexpr const char* kError = "error";
inline constexpr const char* kHeartbeat = "heartbeat";
inline constexpr const char* kCancel = "cancel";
inline constexpr const char* kShutdown = "shutdown";
}  // namespace type

inline constexpr const char* kMessageTypes[] = {"hello", "task", "progress", "phase", "result",
                                                 "error", "heartbeat", "cancel", "shutdown"};

// Numbered error codes. Append only: never renumber or reuse.
enum class ErrorCode : int {
  kMalformedMessage = 1,
  kVersionMismatch = 2,
  kUnknownType = 3,
  kUnknownTask = 4,
  kInvalidArgument = 5,
  kTaskFailed = 6,
  kCancelled = 7,
  kTimeout = 8,
  kWorkerDied = 9,
  kUnsupportedOp = 10,
  kPlanInvalid = 11,
  kShapeMismatch = 12,
  kNanInput = 13,
  kOutOfMemory = 14,
  kBackendUnavailable = 15,
  kShmUnavailable = 16,
  kUnauthorized = 17,
};

inline const char* error_code_name(int code) {
  switch (code) {
    case 1: return "MALFORMED_MESSAGE";
    case 2: return "VERSION_MISMATCH";
    case 3: return "UNKNOWN_TYPE";
    case 4: return "UNKNOWN_TASK";
    case 5: return "INVALID_ARGUMENT";
    case 6: return "TASK_FAILED";
    case 7: return "CANCELLED";
    case 8: return "TIMEOUT";
    case 9: return "WORKER_DIED";
    case 10: return "UNSUPPORTED_OP";
    case 11: return "PLAN_INVALID";
    case 12: return "SHAPE_MISMATCH";
    case 13: return "NAN_INPUT";
    case 14: return "OUT_OF_MEMORY";
    case 15: return "BACKEND_UNAVAILABLE";
    case 16: return "SHM_UNAVAILABLE";
    case 17: return "UNAUTHORIZED";
    default: return "UNKNOWN_ERROR";
  }
}

// Phase names shared by every runtime so that report rows line up (epochs: "epoch-<n>").
namespace phase {
inline constexpr const char* kImport = "import";
inline constexpr const char* kRuntimeCreate = "runtime-create";
inline constexpr const char* kModelLoad = "model-load";
inline constexpr const char* kFirstInference = "first-inference";
inline constexpr const char* kSteadyInference = "steady-inference";
inline constexpr const char* kDataLoad = "data-load";
inline constexpr const char* kCheckpointSave = "checkpoint-save";
inline constexpr const char* kCudaContext = "cuda-context";
inline constexpr const char* kWeightsUpload = "weights-upload";
inline constexpr const char* kArena = "arena";
}  // namespace phase

inline constexpr const char* kMarkStart = "start";
inline constexpr const char* kMarkEnd = "end";

}  // namespace memlane::protocol
