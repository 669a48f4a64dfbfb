#include "rt/task_ctx.h"

namespace memlane::rt {

Val envelope(const char* type, const std::string& id) {
  Val v = Val::map();
  v.set("v", protocol::kVersion).set("type", type).set("id", id);
  return v;
}

void throw_rt_error(const RtError& e) {
  Val d = Val::map();
  for (const auto& [k, v] : e.details) {
    if (auto* i = std::get_if<int64_t>(&v)) d.set(k, *i);
    else if (auto* f = std::get_if<double>(&v)) d.set(k, *f);
    else if (auto* s = std::get_if<std::string>(&v)) d.set(k, *s);
    else d.set(k, Val(std::get<std::vector<int64_t>>(v)));
  }
  throw TaskError{e.code, e.message, d};
}

Val memory_val(const MemoryReading& m) {
  Val v = Val::map();
  v.set("rssKiB", m.rssKiB).set("pssKiB", m.pssKiB).set("ussKiB", m.ussKiB).set("swapKiB", m.swapKiB).set("hwmKiB", m.hwmKiB);
  if (m.gpuKiB >= 0) v.set("gpuKiB", m.gpuKiB);
  return v;
}

Val smaps_val(const SmapsSummary& s) {
  Val v = Val::map();
  for (const auto& [path, counts] : s) {
    Val c = Val::array();
    for (int64_t x : counts) c.push(x);
    v.set(path, std::move(c));
  }
  return v;
}

Val error_envelope(const std::string& id, int code, const std::string& message, const Val& details) {
  Val e = envelope(protocol::type::kError, id);
  e.set("code", code).set("message", message);
  if (!details.empty()) e.set("details", details);
  return e;
}

void TaskCtx::phase(const char* name, bool start, const MemoryReading* given, double tMs, int64_t gpuKiB,
                    const SmapsSummary* givenSmaps) const {
  if (start && !given) reset_peak();  // hwmKiB at the end is then this phase's peak
  MemoryReading m = given ? *given : read_memory();
  if (gpuKiB >= 0) m.gpuKiB = gpuKiB;
  Val e = envelope(protocol::type::kPhase, id_);
  e.set("name", name).set("mark", start ? protocol::kMarkStart : protocol::kMarkEnd)
      .set("tMs", tMs >= 0 ? tMs : now_ms()).set("memory", memory_val(m));
  // smaps walks every mapping: only at phase ends, plus the task's first mark as the baseline.
  if (!start || !smapsSent_) {
    e.set("smaps", smaps_val(givenSmaps ? *givenSmaps : read_smaps()));
    smapsSent_ = true;
  }
  send_(e, {});
}

void TaskCtx::progress(int64_t current, int64_t total, const std::string& label, Val metrics) const {
  Val e = envelope(protocol::type::kProgress, id_);
  e.set("current", current).set("total", total).set("label", label);
  if (!metrics.empty()) e.set("metrics", std::move(metrics));
  send_(e, {});
}

void TaskCtx::result(Val value, Val tensorRefs, std::vector<zmq::message_t> frames) const {
  Val e = envelope(protocol::type::kResult, id_);
  e.set("value", std::move(value));
  if (!tensorRefs.empty()) e.set("tensors", std::move(tensorRefs));
  send_(e, std::move(frames));
}

}  // namespace memlane::rt
