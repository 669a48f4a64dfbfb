// A small dynamic value for building outgoing msgpack envelopes (maps keep insertion order)
// and typed readers for incoming ones. Reading never throws: a wrong type is an error text.
#pragma once

#include <msgpack.hpp>

#include "core/msgpack_read.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace memlane::rt {

class Val {
 public:
  enum class Kind { kNil, kBool, kInt, kFloat, kStr, kArray, kMap };
  Val() = default;
  Val(bool b) : kind_(Kind::kBool), b_(b) {}
  Val(int v) : kind_(Kind::kInt), i_(v) {}
  Val(int64_t v) : kind_(Kind::kInt), i_(v) {}
  Val(uint64_t v) : kind_(Kind::kInt), i_(int64_t(v)) {}
  Val(double v) : kind_(Kind::kFloat), f_(v) {}
  Val(const char* s) : kind_(Kind::kStr), s_(s) {}
  Val(std::string s) : kind_(Kind::kStr), s_(std::move(s)) {}
  Val(const std::vector<int64_t>& v) : kind_(Kind::kArray) {
    for (int64_t x : v) arr_.emplace_back(x);
  }
  static Val array() { Val v; v.kind_ = Kind::kArray; return v; }
  static Val map() { Val v; v.kind_ = Kind::kMap; return v; }

  Val& set(const std::string& k, Val v) {
    kind_ = Kind::kMap;
    map_.emplace_back(k, std::move(v));
    return *this;
  }
  Val& push(Val v) {
    kind_ = Kind::kArray;
    arr_.push_back(std::move(v));
    return *this;
  }
  bool empty() const { return map_.empty() && arr_.empty(); }

  template <typename Stream>
  void pack(msgpack::packer<Stream>& pk) const {
    switch (kind_) {
      case Kind::kNil: pk.pack_nil(); break;
      case Kind::kBool: b_ ? pk.pack_true() : pk.pack_false(); break;
      case Kind::kInt: pk.pack(i_); break;
      case Kind::kFloat: pk.pack_double(f_); break;
      case Kind::kStr: pk.pack(s_); break;
      case Kind::kArray:
        pk.pack_array(uint32_t(arr_.size()));
        for (const auto& v : arr_) v.pack(pk);
        break;
      case Kind::kMap:
        pk.pack_map(uint32_t(map_.size()));
        for (const auto& [k, v] : map_) {
          pk.pack(k);
          v.pack(pk);
        }
        break;
    }
  }

 private:
  Kind kind_ = Kind::kNil;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::vector<Val> arr_;
  std::vector<std::pair<std::string, Val>> map_;
};

inline std::string packb(const Val& v) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  v.pack(pk);
  return std::string(buf.data(), buf.size());
}

// ---- reading ----------------------------------------------------------------------------
using Obj = msgpack::object;

using mp::get;
using mp::unpack_bounded;
inline const char* type_of(const Obj& o) { return mp::type_name(o); }

inline bool as_int(const Obj& o, int64_t* out) {
  if (o.type == msgpack::type::POSITIVE_INTEGER) {
    if (o.via.u64 > uint64_t(INT64_MAX)) return false;
    *out = int64_t(o.via.u64);
    return true;
  }
  if (o.type == msgpack::type::NEGATIVE_INTEGER) { *out = o.via.i64; return true; }
  if ((o.type == msgpack::type::FLOAT64 || o.type == msgpack::type::FLOAT32) && std::isfinite(o.via.f64) &&
      o.via.f64 == double(int64_t(o.via.f64))) {
    *out = int64_t(o.via.f64);
    return true;
  }
  return false;
}

inline bool as_str(const Obj& o, std::string* out) {
  if (o.type != msgpack::type::STR) return false;
  out->assign(o.via.str.ptr, o.via.str.size);
  return true;
}

inline bool as_int_list(const Obj& o, std::vector<int64_t>* out) {
  if (o.type != msgpack::type::ARRAY) return false;
  out->clear();
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    int64_t v;
    if (!as_int(o.via.array.ptr[i], &v)) return false;
    out->push_back(v);
  }
  return true;
}

}  // namespace memlane::rt
