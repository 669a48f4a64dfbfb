// memlane-rt --connect ENDPOINT [--name NAME] [--device cpu|cuda|auto] [--threads N]
//            [--heartbeat-timeout SECONDS]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <malloc.h>

#include "rt/proc_memory.h"
#include "rt/worker.h"

namespace {

const char* kUsage =
    "usage: memlane-rt --connect ENDPOINT [--name NAME] [--device cpu|cuda|auto] [--threads N]\n"
    "                  [--heartbeat-timeout SECONDS]\n"
    "  --connect            the orchestrator's ROUTER endpoint (tcp://127.0.0.1:PORT or ipc://PATH)\n"
    "  --name               worker name in hello ids (default memlane-rt)\n"
    "  --device             default device for tasks that do not name one (default auto)\n"
    "  --threads            default intra-op threads (default 0 = all cores)\n"
    "  --heartbeat-timeout  exit (code 3) after this many seconds without a message (default 30, 0 = never)\n"
    "environment (set by the orchestrator, never argv): MEMLANE_WORKER_KEY, the per-spawn key proved\n"
    "  in the hello; MEMLANE_MAX_MESSAGE_BYTES, the run's message size limit (docs/protocol.md)\n";

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "memlane-rt: %s\n%s", msg.c_str(), kUsage);
  std::exit(2);
}

bool parse_number(const char* s, double* out) {
  char* end = nullptr;
  *out = std::strtod(s, &end);
  return end && *end == 0 && end != s;
}

}  // namespace

int main(int argc, char** argv) {
  const double startMs = memlane::rt::process_start_ms();
  // One malloc arena for every thread (zmq's I/O thread, the task thread, the pool): each extra
  // arena keeps its own partly used 64 MiB heap, resident pages counted in this process's USS,
  // for allocations that are all made outside the timed loop.
  mallopt(M_ARENA_MAX, 1);
  memlane::rt::WorkerOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) usage_error("option " + a + " needs a value");
    const char* v = argv[++i];
    double num;
    if (a == "--connect") o.endpoint = v;
    else if (a == "--name") o.name = v;
    else if (a == "--device") {
      o.device = v;
      if (o.device != "cpu" && o.device != "cuda" && o.device != "auto")
        usage_error("--device: expected cpu, cuda or auto, got '" + o.device + "'");
    } else if (a == "--threads") {
      if (!parse_number(v, &num) || num < 0 || num > 1024 || num != double(int(num)))
        usage_error(std::string("--threads: expected an integer in [0, 1024], got '") + v + "'");
      o.threads = int(num);
    } else if (a == "--heartbeat-timeout") {
      if (!parse_number(v, &num) || num < 0) usage_error(std::string("--heartbeat-timeout: expected seconds >= 0, got '") + v + "'");
      o.heartbeatTimeoutS = num;
    } else {
      usage_error("unknown option " + a);
    }
  }
  if (o.endpoint.empty()) usage_error("--connect ENDPOINT is required");
  try {
    return memlane::rt::serve(o, startMs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "memlane-rt: %s\n", e.what());
    return 1;
  }
}
