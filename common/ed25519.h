// Ed25519 keys and signatures through OpenSSL EVP, with PEM files that `openssl` reads too.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "bytes.h"
#include "result.h"

namespace tessera::common {

constexpr std::size_t kEd25519PublicKeyBytes = 32;
constexpr std::size_t kEd25519SignatureBytes = 64;
// A key id is the first 8 bytes of SHA-256(raw public key), in hex.
constexpr std::size_t kKeyIdHexLength = 16;
// Padded base64 of a raw public key and of a signature, as JSON carries them.
constexpr std::size_t kEd25519PublicKeyBase64Length = (kEd25519PublicKeyBytes + 2) / 3 * 4;  // 44
constexpr std::size_t kEd25519SignatureBase64Length = (kEd25519SignatureBytes + 2) / 3 * 4;  // 88

using Ed25519Signature = std::array<std::uint8_t, kEd25519SignatureBytes>;
using Ed25519PublicKeyBytes = std::array<std::uint8_t, kEd25519PublicKeyBytes>;

// A public key: verifies signatures. Immutable after construction; safe to share.
class VerifyKey {
public:
    static Result<VerifyKey> from_raw(ByteView raw);
    static Result<VerifyKey> load_pem(const std::filesystem::path& path);
    static Result<VerifyKey> from_pem(std::string_view pem);

    const Ed25519PublicKeyBytes& raw() const { return raw_; }
    const std::string& key_id() const { return key_id_; }
    std::string to_pem() const;
    Status save_pem(const std::filesystem::path& path) const;

    bool verify(ByteView message, ByteView signature) const;

private:
    explicit VerifyKey(const Ed25519PublicKeyBytes& raw);
    Ed25519PublicKeyBytes raw_{};
    std::string key_id_;
};

// A private key: signs. Thread-safe for concurrent sign() calls (each uses its own context).
class SigningKey {
public:
    static SigningKey generate();
    static Result<SigningKey> load_pem(const std::filesystem::path& path);

    SigningKey(SigningKey&&) noexcept;
    SigningKey& operator=(SigningKey&&) noexcept;
    ~SigningKey();

    // Writes PKCS#8 PEM, created with mode 0600, atomically.
    Status save_pem(const std::filesystem::path& path) const;
    const VerifyKey& verify_key() const { return verify_key_; }
    Ed25519Signature sign(ByteView message) const;

private:
    struct Key;
    SigningKey(std::unique_ptr<Key> key, VerifyKey verify_key);
    std::unique_ptr<Key> key_;
    VerifyKey verify_key_;
};

std::string key_id_of(ByteView raw_public_key);

}  // namespace tessera::common
