// SHA-256 through OpenSSL EVP: one-shot, incremental, and over a file.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "bytes.h"
#include "result.h"

namespace tessera::common {

using Sha256Digest = std::array<std::uint8_t, 32>;
constexpr std::size_t kSha256HexLength = 64;
// A hash as messages show it: its first 12 hex digits.
constexpr std::size_t kShortHashChars = 12;
inline std::string short_hash(const std::string& hex) { return hex.substr(0, kShortHashChars); }

Sha256Digest sha256(ByteView bytes);
std::string sha256_hex(ByteView bytes);
Result<std::string> sha256_file_hex(const std::filesystem::path& path);

// Incremental hashing for data that arrives in pieces. Not thread-safe.
class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(Sha256&&) noexcept;
    Sha256& operator=(Sha256&&) noexcept;

    void update(ByteView bytes);
    // Ends this hash; the object is ready for a new one afterwards.
    Sha256Digest finish();

private:
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace tessera::common
