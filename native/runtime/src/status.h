// Recoverable failures inside memlane-rt. Each maps to one protocol error code
// (include/memlane/protocol.h) so that a failure crosses the process boundary as data.
// Asserts are reserved for bugs; anything a plan file or a request can cause is a Status.
#pragma once

#include <cstdint>

namespace memlane {

enum class Status : uint8_t {
  kOk = 0,
  kInvalidArgument,     // a caller's argument is out of range (batch > maxBatch, threads < 0, ...)
  kIoError,             // open/stat/mmap failed
  kPlanInvalid,         // the plan file fails a check of docs/plan-format.md
  kUnsupportedOp,       // an op or attribute value this backend does not implement
  kShapeMismatch,       // an input's shape differs from the plan's
  kNanInput,            // an input holds NaN
  kOutOfMemory,         // the arena or a device allocation failed
  kBackendUnavailable,  // e.g. CUDA not built or no device present
  kNotLoaded,           // run before load
  kCancelled,
  kInternal,            // a backend library call failed (cuBLAS, CUDA) at run time
};

inline const char* status_name(Status s) {
  switch (s) {
    case Status::kOk: return "OK";
    case Status::kInvalidArgument: return "INVALID_ARGUMENT";
    case Status::kIoError: return "IO_ERROR";
    case Status::kPlanInvalid: return "PLAN_INVALID";
    case Status::kUnsupportedOp: return "UNSUPPORTED_OP";
    case Status::kShapeMismatch: return "SHAPE_MISMATCH";
    case Status::kNanInput: return "NAN_INPUT";
    case Status::kOutOfMemory: return "OUT_OF_MEMORY";
    case Status::kBackendUnavailable: return "BACKEND_UNAVAILABLE";
    case Status::kNotLoaded: return "NOT_LOADED";
    case Status::kCancelled: return "CANCELLED";
    case Status::kInternal: return "INTERNAL";
  }
  return "UNKNOWN";
}

}  // namespace memlane
