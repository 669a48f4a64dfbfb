// HMAC-SHA256 (FIPS 180-4, RFC 2104) for hello.auth: memlane-rt proves it holds the per-spawn
// key the orchestrator put in its environment (docs/protocol.md, "Trust"). A few dozen lines
// here instead of linking a crypto library into a runtime whose resident set is the point.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace memlane {

using Sha256Digest = std::array<uint8_t, 32>;

Sha256Digest sha256(const uint8_t* data, size_t size);
Sha256Digest hmac_sha256(const uint8_t* key, size_t keySize, const uint8_t* data, size_t size);
std::string to_hex(const uint8_t* data, size_t size);
// Decodes lowercase or uppercase hex; false when `text` is not hex of even length.
bool from_hex(const std::string& text, std::string* out);

}  // namespace memlane
