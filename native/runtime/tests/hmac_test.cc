// HMAC-SHA256 of hello.auth against FIPS 180-2 / RFC 4231 vectors, and against the auth the
// TypeScript and Python sides compute for one key, id and pid (same prefix, same hex).
#include <string>

#include "core/hmac_sha256.h"
#include "harness.h"
#include "memlane/protocol.h"

using namespace memlane;

static std::string hex_sha(const std::string& s) {
  const auto d = sha256(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  return to_hex(d.data(), d.size());
}
static std::string hex_hmac(const std::string& k, const std::string& s) {
  const auto d = hmac_sha256(reinterpret_cast<const uint8_t*>(k.data()), k.size(), reinterpret_cast<const uint8_t*>(s.data()), s.size());
  return to_hex(d.data(), d.size());
}

int main() {
  CHECK(hex_sha("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(hex_sha("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(hex_sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(hex_sha(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  CHECK(hex_hmac(std::string(20, '\x0b'), "Hi There") == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(hex_hmac("Jefe", "what do ya want for nothing?") == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(hex_hmac(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First") ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  // The same hello.auth as helloAuth() in src/transport/auth.ts and hello_auth() in Python
  // (key 00 01 .. 1f, id "memlane-rt-4242", pid 4242), checked there against this value.
  std::string key;
  for (int i = 0; i < 32; ++i) key.push_back(char(i));
  const std::string text = std::string(protocol::kHelloAuthPrefix) + "memlane-rt-4242\n4242";
  CHECK(hex_hmac(key, text) == "522fecf8dc58afd908d0e095efe77b1cca68f3ba1501bab395a5a06711a690ed");
  std::string bytes;
  CHECK(from_hex("00ff7A", &bytes) && bytes == std::string("\x00\xff\x7a", 3));
  CHECK(!from_hex("abc", &bytes));
  CHECK(!from_hex("zz", &bytes));
  return mltest::finish("hmac_test");
}
