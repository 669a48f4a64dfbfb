// The memlane-rt worker: one DEALER owned by the main thread (receives, validates,
// answers heartbeats and cancels at once), one task thread that runs tasks in order and
// hands its messages back over an inproc PAIR. See docs/protocol.md, docs/worker-tasks.md.
#pragma once

#include <string>

namespace memlane::rt {

struct WorkerOptions {
  std::string endpoint;
  std::string name = "memlane-rt";
  std::string device = "auto";
  int threads = 0;
  double heartbeatTimeoutS = 30.0;  // exit (code 3) after this long without any message; 0 = never
};

inline constexpr int kExitOrphaned = 3;

// Serves until shutdown (returns 0) or until orphaned (returns kExitOrphaned).
int serve(const WorkerOptions& options, double processStartMs);

}  // namespace memlane::rt
