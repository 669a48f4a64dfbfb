// What the plan reader's files share (plan_reader.cc, profile_table.cc): little-endian field
// reads, the failure that names a field, and the preamble's layout once checked.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "plan/plan.h"
#include "status.h"

namespace memlane::plan_reader {

inline uint64_t rd_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint32_t rd_u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

// Failure with "field: expected X, found Y".
struct Fail {
  Status status = Status::kPlanInvalid;
  std::string message;
};
template <typename A, typename B>
Fail fail(const std::string& field, const A& expected, const B& found) {
  std::ostringstream s;
  s << field << ": expected " << expected << ", found " << found;
  return {Status::kPlanInvalid, s.str()};
}

// The preamble's fields once checked: the version, the header region and the blob.
struct Layout {
  uint32_t version = 0;
  uint64_t hoff = 0, hlen = 0, boff = 0, blen = 0;
};

// Version 3: the profile table at the start of the header region; each profile's header range
// {offset from the file start, length}. Errors name the field and its byte offset.
Fail parse_profile_table(const uint8_t* data, const Layout& L, std::vector<std::pair<uint64_t, uint64_t>>* out);

// Every profile has profile 0's inputs and outputs (names, dtypes, ranks, batch axes) and input
// shapes no other profile has.
Fail check_profiles_agree(const std::vector<Plan>& profiles);

}  // namespace memlane::plan_reader
