// Reading msgpack safely, shared by the plan reader (plan headers) and the worker
// (envelopes): both parse bytes that may be hostile or corrupt.
#pragma once

#include <msgpack.hpp>

#include <cstddef>
#include <string>

namespace memlane::mp {

using Obj = msgpack::object;

// Unpack with limits no honest message exceeds: a container cannot claim more entries than
// there are bytes left (msgpack-c would otherwise allocate what a 5-byte header claims,
// e.g. 2^32 array slots), and nesting stops at 64. Throws (std::exception) when exceeded.
inline msgpack::object_handle unpack_bounded(const char* data, size_t size) {
  const msgpack::unpack_limit limit(size, size / 2 + 1, size, size, size, 64);
  return msgpack::unpack(data, size, nullptr, nullptr, limit);
}

// The value under a string key of a map; null when `m` is no map or lacks the key.
inline const Obj* get(const Obj* m, const char* key) {
  if (!m || m->type != msgpack::type::MAP) return nullptr;
  const size_t n = std::char_traits<char>::length(key);
  for (uint32_t i = 0; i < m->via.map.size; ++i) {
    const auto& kv = m->via.map.ptr[i];
    if (kv.key.type == msgpack::type::STR && kv.key.via.str.size == n &&
        std::char_traits<char>::compare(kv.key.via.str.ptr, key, n) == 0)
      return &kv.val;
  }
  return nullptr;
}

// The type's name as error messages say it ("expected int, found str").
inline const char* type_name(const Obj& o) {
  switch (o.type) {
    case msgpack::type::NIL: return "nil";
    case msgpack::type::BOOLEAN: return "bool";
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER: return "int";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return "float";
    case msgpack::type::STR: return "str";
    case msgpack::type::BIN: return "bin";
    case msgpack::type::ARRAY: return "array";
    case msgpack::type::MAP: return "map";
    default: return "ext";
  }
}

}  // namespace memlane::mp
