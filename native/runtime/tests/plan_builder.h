// Writes .mlplan bytes in the layout of docs/plan-format.md, so ctest needs no Node:
// tensors get sequential arena offsets (64-byte aligned per sample) and aligned blob offsets.
#pragma once

#include <msgpack.hpp>

#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "plan/plan_format.h"

namespace mltest {

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>, bool>;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

struct BTensor {
  std::string name, kind;
  std::vector<int64_t> shape;
  int64_t offset = 0, bytes = 0;
  std::vector<float> data;
  std::string dtype = "float32";
  std::vector<uint8_t> raw;  // a weight of another dtype: its little-endian bytes
};

inline int64_t dtype_bytes(const std::string& d) { return d == "int64" ? 8 : d == "bool" ? 1 : 4; }
struct BOp {
  std::string op;
  std::vector<int64_t> inputs, outputs;
  Attrs attrs;
};

class PlanBuilder {
 public:
  std::vector<BTensor> tensors;
  std::vector<BOp> ops;
  std::vector<int64_t> inputs, outputs;
  int64_t arena_cursor = 0, blob_cursor = 0;
  int64_t bytes_per_sample_override = -1;
  bool concat_in_place = false;  // arena.concatInPlace (plan/concat_in_place.h): the test places the inputs

  static int64_t count(const std::vector<int64_t>& s, size_t from) {
    int64_t n = 1;
    for (size_t i = from; i < s.size(); ++i) n *= s[i];
    return n;
  }
  // shape without the batch; stored as [-1, ...shape]
  int act(const std::string& name, std::vector<int64_t> shape, const std::string& kind = "activation") {
    BTensor t;
    t.name = name;
    t.kind = kind;
    t.shape = {-1};
    t.shape.insert(t.shape.end(), shape.begin(), shape.end());
    t.bytes = count(t.shape, 1) * 4;
    t.offset = arena_cursor;
    arena_cursor += (t.bytes + 63) / 64 * 64;
    tensors.push_back(t);
    int id = int(tensors.size()) - 1;
    if (kind == "input") inputs.push_back(id);
    if (kind == "output") outputs.push_back(id);
    return id;
  }
  // plan v2: the full shape with -k = k x batch at any axis, and a dtype.
  int tensor(const std::string& name, std::vector<int64_t> full, const std::string& kind, const std::string& dtype = "float32") {
    BTensor t;
    t.name = name;
    t.kind = kind;
    t.shape = std::move(full);
    t.dtype = dtype;
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d < 0 ? -d : d;
    t.bytes = n * dtype_bytes(dtype);
    t.offset = arena_cursor;
    arena_cursor += (t.bytes + 63) / 64 * 64;
    tensors.push_back(t);
    int id = int(tensors.size()) - 1;
    if (kind == "input") inputs.push_back(id);
    if (kind == "output") outputs.push_back(id);
    return id;
  }
  template <typename T>
  int typed_weight(const std::string& name, std::vector<int64_t> shape, const std::string& dtype, const std::vector<T>& values) {
    BTensor t;
    t.name = name;
    t.kind = "weight";
    t.shape = shape;
    t.dtype = dtype;
    t.raw.resize(values.size() * sizeof(T));
    std::memcpy(t.raw.data(), values.data(), t.raw.size());
    t.bytes = int64_t(t.raw.size());
    t.offset = blob_cursor;
    blob_cursor += (t.bytes + 63) / 64 * 64;
    tensors.push_back(t);
    return int(tensors.size()) - 1;
  }
  int input(const std::string& n, std::vector<int64_t> s) { return act(n, s, "input"); }
  int output(const std::string& n, std::vector<int64_t> s) { return act(n, s, "output"); }
  int weight(const std::string& name, std::vector<int64_t> shape, std::vector<float> data) {
    BTensor t;
    t.name = name;
    t.kind = "weight";
    t.shape = shape;
    t.bytes = count(shape, 0) * 4;
    t.data = std::move(data);
    t.data.resize(size_t(t.bytes / 4));
    t.offset = blob_cursor;
    blob_cursor += (t.bytes + 63) / 64 * 64;
    tensors.push_back(t);
    return int(tensors.size()) - 1;
  }
  void op(const std::string& type, std::vector<int64_t> in, std::vector<int64_t> out, Attrs attrs = {}) {
    ops.push_back({type, std::move(in), std::move(out), std::move(attrs)});
  }

  std::vector<uint8_t> header() const {
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    pk.pack_map(7);
    pk.pack(std::string("producer")); pk.pack(std::string("memlane ctest"));
    pk.pack(std::string("source")); pk.pack(std::string("built-in-test.onnx"));
    pk.pack(std::string("tensors"));
    pk.pack_array(uint32_t(tensors.size()));
    for (const auto& t : tensors) {
      pk.pack_map(6);
      pk.pack(std::string("name")); pk.pack(t.name);
      pk.pack(std::string("dtype")); pk.pack(t.dtype);
      pk.pack(std::string("shape")); pk.pack(t.shape);
      pk.pack(std::string("kind")); pk.pack(t.kind);
      pk.pack(std::string("offset")); pk.pack(t.offset);
      pk.pack(std::string("bytes")); pk.pack(t.bytes);
    }
    pk.pack(std::string("inputs")); pk.pack(inputs);
    pk.pack(std::string("outputs")); pk.pack(outputs);
    pk.pack(std::string("ops"));
    pk.pack_array(uint32_t(ops.size()));
    for (size_t i = 0; i < ops.size(); ++i) {
      const auto& o = ops[i];
      pk.pack_map(5);
      pk.pack(std::string("op")); pk.pack(o.op);
      pk.pack(std::string("name")); pk.pack(o.op + "_" + std::to_string(i));
      pk.pack(std::string("inputs")); pk.pack(o.inputs);
      pk.pack(std::string("outputs")); pk.pack(o.outputs);
      pk.pack(std::string("attrs"));
      pk.pack_map(uint32_t(o.attrs.size()));
      for (const auto& [k, v] : o.attrs) {
        pk.pack(k);
        std::visit([&](const auto& x) { pk.pack(x); }, v);
      }
    }
    pk.pack(std::string("arena"));
    pk.pack_map(concat_in_place ? 4 : 3);
    if (concat_in_place) { pk.pack(std::string("concatInPlace")); pk.pack(true); }
    pk.pack(std::string("bytesPerSample"));
    pk.pack(bytes_per_sample_override >= 0 ? bytes_per_sample_override : arena_cursor);
    pk.pack(std::string("lowerBoundPerSample")); pk.pack(arena_cursor);
    pk.pack(std::string("alignment")); pk.pack(int64_t(64));
    return std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(buf.data()),
                                reinterpret_cast<const uint8_t*>(buf.data()) + buf.size());
  }

  static void put64(std::vector<uint8_t>& f, size_t at, uint64_t v) {
    for (int i = 0; i < 8; ++i) f[at + i] = uint8_t(v >> (8 * i));
  }

  std::vector<uint8_t> build() const {
    namespace pf = memlane::plan_format;
    std::vector<uint8_t> h = header();
    const uint64_t H = h.size();
    const uint64_t blob_off = (64 + H + 63) / 64 * 64;
    const uint64_t B = uint64_t(blob_cursor);
    std::vector<uint8_t> f(blob_off + B, 0);
    std::memcpy(f.data(), pf::kMagic, 8);
    f[8] = uint8_t(pf::kVersionSingle);  // one profile: the v2 layout (build_profiles writes v3)
    put64(f, pf::kOffHeaderOffset, 64);
    put64(f, pf::kOffHeaderLength, H);
    put64(f, pf::kOffBlobOffset, blob_off);
    put64(f, pf::kOffBlobLength, B);
    put64(f, pf::kOffFileLength, blob_off + B);
    put64(f, pf::kOffHeaderHash, pf::fnv1a64(h.data(), h.size()));
    std::memcpy(f.data() + 64, h.data(), H);
    for (const auto& t : tensors)
      // (a test may move a weight out of the blob on purpose: its bytes are then not written)
      if (t.kind == "weight" && !t.data.empty() && uint64_t(t.offset) + t.data.size() * 4 <= B)
        std::memcpy(f.data() + blob_off + t.offset, t.data.data(), t.data.size() * 4);
    for (const auto& t : tensors)
      if (t.kind == "weight" && !t.raw.empty() && uint64_t(t.offset) + t.raw.size() <= B)
        std::memcpy(f.data() + blob_off + t.offset, t.raw.data(), t.raw.size());
    return f;
  }

  // A v3 plan of several shape profiles (docs/plan-format.md, "Profiles"): the profile table,
  // then each builder's header. The blob is the first builder's: every profile must lay its
  // weights out the same way (the same weight() calls in the same order), so they share them.
  static std::vector<uint8_t> build_profiles(const std::vector<const PlanBuilder*>& ps) {
    namespace pf = memlane::plan_format;
    std::vector<std::vector<uint8_t>> hs;
    for (const PlanBuilder* p : ps) hs.push_back(p->header());
    uint64_t H = pf::kOffProfileEntries + pf::kProfileEntryBytes * hs.size();
    const uint64_t table = H;
    for (const auto& h : hs) H += h.size();
    std::vector<uint8_t> f = ps[0]->build();  // preamble and blob come from the first
    const uint64_t old_blob = rd(f, pf::kOffBlobOffset), B = rd(f, pf::kOffBlobLength);
    std::vector<uint8_t> blob(f.begin() + int64_t(old_blob), f.begin() + int64_t(old_blob + B));
    const uint64_t blob_off = (64 + H + 63) / 64 * 64;
    f.assign(blob_off + B, 0);
    std::memcpy(f.data(), pf::kMagic, 8);
    f[8] = uint8_t(pf::kVersion);
    put64(f, pf::kOffHeaderOffset, 64);
    put64(f, pf::kOffHeaderLength, H);
    put64(f, pf::kOffBlobOffset, blob_off);
    put64(f, pf::kOffBlobLength, B);
    put64(f, pf::kOffFileLength, blob_off + B);
    f[64 + pf::kOffProfileCount] = uint8_t(hs.size());
    uint64_t at = 64 + table;
    for (size_t i = 0; i < hs.size(); ++i) {
      put64(f, 64 + pf::kOffProfileEntries + pf::kProfileEntryBytes * i, at);
      put64(f, 64 + pf::kOffProfileEntries + pf::kProfileEntryBytes * i + 8, hs[i].size());
      std::memcpy(f.data() + at, hs[i].data(), hs[i].size());
      at += hs[i].size();
    }
    rehash(f);
    std::memcpy(f.data() + blob_off, blob.data(), B);
    return f;
  }
  static uint64_t rd(const std::vector<uint8_t>& f, size_t at) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | f[at + size_t(i)];
    return v;
  }
  // After a test edits header bytes on purpose: the hash matches again, so the check that
  // follows the hash is the one that fails.
  static void rehash(std::vector<uint8_t>& f) {
    namespace pf = memlane::plan_format;
    put64(f, pf::kOffHeaderHash, pf::fnv1a64(f.data() + 64, rd(f, pf::kOffHeaderLength)));
  }
};

}  // namespace mltest
