// Plan v3's shape profiles (docs/plan-format.md, "Profile table"): the table at the start of
// the header region, and the checks that the parsed profiles agree with each other.
#include <string>

#include "plan/plan_format.h"
#include "plan/reader_common.h"

namespace memlane::plan_reader {
namespace {

namespace pf = plan_format;

// A v3 profile table field: its name and its absolute byte offset, for every message.
std::string table_field(const std::string& name, uint64_t at) {
  return name + " (profile table, byte " + std::to_string(at) + ")";
}

}  // namespace

// Each profile's header range lies inside the region, after the table and the previous profile.
Fail parse_profile_table(const uint8_t* data, const Layout& L, std::vector<std::pair<uint64_t, uint64_t>>* out) {
  const uint64_t end = L.hoff + L.hlen;
  if (L.hlen < pf::kOffProfileEntries)
    return fail(table_field("profiles.count", L.hoff), "a table of >= " + std::to_string(pf::kOffProfileEntries) + " bytes",
                "a header of " + std::to_string(L.hlen) + " bytes");
  const uint32_t count = rd_u32(data + L.hoff + pf::kOffProfileCount);
  if (count < 1 || count > pf::kMaxProfiles)
    return fail(table_field("profiles.count", L.hoff + pf::kOffProfileCount), "1.." + std::to_string(pf::kMaxProfiles), count);
  const uint32_t reserved = rd_u32(data + L.hoff + pf::kOffProfileReserved);
  if (reserved != 0) return fail(table_field("profiles.reserved", L.hoff + pf::kOffProfileReserved), 0, reserved);
  const uint64_t table_end = pf::kOffProfileEntries + pf::kProfileEntryBytes * uint64_t(count);
  if (table_end > L.hlen)
    return fail(table_field("profiles.count", L.hoff + pf::kOffProfileCount),
                "a table that fits the " + std::to_string(L.hlen) + "-byte header (" + std::to_string(count) + " entries need " +
                    std::to_string(table_end) + ")",
                count);
  uint64_t prev_end = L.hoff + table_end;
  for (uint32_t i = 0; i < count; ++i) {
    const uint64_t e = L.hoff + pf::kOffProfileEntries + pf::kProfileEntryBytes * i;
    const uint64_t off = rd_u64(data + e), len = rd_u64(data + e + 8);
    const std::string p = "profiles[" + std::to_string(i) + "]";
    if (off < prev_end || off > end)
      return fail(table_field(p + ".offset", e), std::to_string(prev_end) + ".." + std::to_string(end) +
                                                    " (after the table and the previous profile, inside the header)", off);
    if (len < 1 || len > end - off)
      return fail(table_field(p + ".length", e + 8), "1.." + std::to_string(end - off) + " (inside the header)", len);
    out->emplace_back(off, len);
    prev_end = off + len;
  }
  return {Status::kOk, ""};
}

namespace {

std::string io_signature(const Plan& p, int32_t id) {
  const TensorInfo& t = p.tensors[size_t(id)];
  return t.name + " " + dtype_name(t.dtype) + " rank " + std::to_string(t.shape.size()) + " batch axis " +
         std::to_string(t.batch_axis());
}

}  // namespace

// Profiles differ only in non-batch dimensions; input shapes no other profile has, else which
// profile a request means would be ambiguous. The same words as src/compiler/read.ts.
Fail check_profiles_agree(const std::vector<Plan>& ps) {
  const Plan& first = ps[0];
  for (size_t i = 0; i < ps.size(); ++i) {
    const std::string p = "profiles[" + std::to_string(i) + "]";
    for (int side = 0; side < 2; ++side) {
      const auto& a = side ? first.outputs : first.inputs;
      const auto& b = side ? ps[i].outputs : ps[i].inputs;
      const std::string name = side ? ".outputs" : ".inputs";
      if (a.size() != b.size()) return fail(p + name, std::to_string(a.size()) + " tensors (as profiles[0])", b.size());
      for (size_t k = 0; k < a.size(); ++k) {
        const std::string want = io_signature(first, a[k]), got = io_signature(ps[i], b[k]);
        if (want != got) return fail(p + name + "[" + std::to_string(k) + "]", want + " (as profiles[0])", got);
      }
    }
    for (size_t j = 0; j < i; ++j) {
      bool same = true;
      for (size_t k = 0; k < ps[i].inputs.size() && same; ++k)
        same = ps[i].tensors[size_t(ps[i].inputs[k])].shape == ps[j].tensors[size_t(ps[j].inputs[k])].shape;
      if (same) return fail(p + ".inputs", "shapes no other profile has", "those of profiles[" + std::to_string(j) + "]");
    }
  }
  return {Status::kOk, ""};
}

}  // namespace memlane::plan_reader
