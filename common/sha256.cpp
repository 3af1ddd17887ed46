// SHA-256 via OpenSSL's EVP digest interface.
#include "sha256.h"

#include <openssl/evp.h>

#include <fstream>
#include <stdexcept>

#include "bytes.h"
#include "text_encoding.h"

namespace tessera::common {

struct Sha256::State {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    ~State() { EVP_MD_CTX_free(ctx); }
    void reset() {
        // Failing here means OpenSSL itself is unusable: nothing a caller can handle.
        if (ctx == nullptr || EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1)
            throw std::runtime_error("OpenSSL SHA-256 initialisation failed");
    }
};

Sha256::Sha256() : state_(std::make_unique<State>()) { state_->reset(); }
Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::update(ByteView bytes) {
    if (!bytes.empty()) EVP_DigestUpdate(state_->ctx, bytes.data(), bytes.size());
}

Sha256Digest Sha256::finish() {
    Sha256Digest digest{};
    unsigned int length = 0;
    EVP_DigestFinal_ex(state_->ctx, digest.data(), &length);
    state_->reset();
    return digest;
}

Sha256Digest sha256(ByteView bytes) {
    Sha256 hasher;
    hasher.update(bytes);
    return hasher.finish();
}

std::string sha256_hex(ByteView bytes) { return to_hex(sha256(bytes)); }

Result<std::string> sha256_file_hex(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error("cannot open " + path.string() + " for hashing");
    Sha256 hasher;
    std::vector<char> buffer(kMiB);
    while (in) {
        in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
        hasher.update(as_bytes(std::string_view(buffer.data(), static_cast<std::size_t>(in.gcount()))));
    }
    if (in.bad()) return make_error("read error while hashing " + path.string());
    return to_hex(hasher.finish());
}

}  // namespace tessera::common
