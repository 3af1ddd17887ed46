// Ed25519 via OpenSSL 3 EVP (EVP_PKEY_ED25519, one-shot EVP_DigestSign/Verify with no digest).
#include "ed25519.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <stdexcept>

#include "file_io.h"
#include "sha256.h"
#include "text_encoding.h"

namespace tessera::common {
namespace {

constexpr std::uint64_t kMaxPemBytes = 64 * 1024;

struct PkeyDeleter {
    void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyDeleter>;

struct BioDeleter {
    void operator()(BIO* bio) const { BIO_free(bio); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;

struct MdCtxDeleter {
    void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

std::string openssl_error() {
    unsigned long code = ERR_get_error();
    ERR_clear_error();
    if (code == 0) return "unknown OpenSSL error";
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    return text;
}

Result<Ed25519PublicKeyBytes> raw_public_key(EVP_PKEY* key) {
    Ed25519PublicKeyBytes raw{};
    std::size_t length = raw.size();
    if (EVP_PKEY_get_raw_public_key(key, raw.data(), &length) != 1 || length != raw.size())
        return make_error("cannot read Ed25519 public key: " + openssl_error());
    return raw;
}

std::string bio_to_string(BIO* bio) {
    char* data = nullptr;
    long length = BIO_get_mem_data(bio, &data);
    return std::string(data, static_cast<std::size_t>(length));
}

Result<std::string> read_pem_text(const std::filesystem::path& path) {
    auto bytes = read_file(path, kMaxPemBytes);
    if (!bytes) return bytes.error();
    return std::string(as_string_view(*bytes));
}

}  // namespace

std::string key_id_of(ByteView raw_public_key) {
    auto digest = sha256(raw_public_key);
    return to_hex(ByteView(digest.data(), kKeyIdHexLength / 2));
}

VerifyKey::VerifyKey(const Ed25519PublicKeyBytes& raw) : raw_(raw), key_id_(key_id_of(raw)) {}

Result<VerifyKey> VerifyKey::from_raw(ByteView raw) {
    if (raw.size() != kEd25519PublicKeyBytes)
        return make_error("an Ed25519 public key is 32 bytes, got " + std::to_string(raw.size()));
    PkeyPtr key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, raw.data(), raw.size()));
    if (!key) return make_error("invalid Ed25519 public key: " + openssl_error());
    Ed25519PublicKeyBytes copy{};
    std::copy(raw.begin(), raw.end(), copy.begin());
    return VerifyKey(copy);
}

Result<VerifyKey> VerifyKey::from_pem(std::string_view pem) {
    BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
    PkeyPtr key(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
    if (!key) return make_error("not a PEM public key: " + openssl_error());
    if (EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519) return make_error("the PEM public key is not an Ed25519 key");
    auto raw = raw_public_key(key.get());
    if (!raw) return raw.error();
    return VerifyKey(*raw);
}

Result<VerifyKey> VerifyKey::load_pem(const std::filesystem::path& path) {
    auto text = read_pem_text(path);
    if (!text) return text.error();
    auto key = from_pem(*text);
    if (!key) return with_context(path.string(), key.error());
    return key;
}

std::string VerifyKey::to_pem() const {
    PkeyPtr key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, raw_.data(), raw_.size()));
    BioPtr bio(BIO_new(BIO_s_mem()));
    if (!key || !bio || PEM_write_bio_PUBKEY(bio.get(), key.get()) != 1)
        throw std::runtime_error("cannot encode Ed25519 public key: " + openssl_error());
    return bio_to_string(bio.get());
}

Status VerifyKey::save_pem(const std::filesystem::path& path) const {
    return write_file_atomic(path, as_bytes(to_pem()), 0644);
}

bool VerifyKey::verify(ByteView message, ByteView signature) const {
    if (signature.size() != kEd25519SignatureBytes) return false;
    PkeyPtr key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, raw_.data(), raw_.size()));
    MdCtxPtr ctx(EVP_MD_CTX_new());
    if (!key || !ctx) return false;
    if (EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) return false;
    bool valid = EVP_DigestVerify(ctx.get(), signature.data(), signature.size(), message.data(), message.size()) == 1;
    ERR_clear_error();
    return valid;
}

struct SigningKey::Key {
    PkeyPtr pkey;
};

SigningKey::SigningKey(std::unique_ptr<Key> key, VerifyKey verify_key)
    : key_(std::move(key)), verify_key_(std::move(verify_key)) {}
SigningKey::SigningKey(SigningKey&&) noexcept = default;
SigningKey& SigningKey::operator=(SigningKey&&) noexcept = default;
SigningKey::~SigningKey() = default;

SigningKey SigningKey::generate() {
    EVP_PKEY* raw = nullptr;
    std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr),
                                                                    EVP_PKEY_CTX_free);
    if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 || EVP_PKEY_keygen(ctx.get(), &raw) != 1)
        throw std::runtime_error("Ed25519 key generation failed: " + openssl_error());
    auto key = std::make_unique<Key>(Key{PkeyPtr(raw)});
    auto public_raw = raw_public_key(raw);
    if (!public_raw) throw std::runtime_error(public_raw.message());
    return SigningKey(std::move(key), VerifyKey::from_raw(*public_raw).value());
}

Result<SigningKey> SigningKey::load_pem(const std::filesystem::path& path) {
    auto text = read_pem_text(path);
    if (!text) return text.error();
    BioPtr bio(BIO_new_mem_buf(text->data(), static_cast<int>(text->size())));
    PkeyPtr pkey(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
    if (!pkey) return make_error(path.string() + ": not a PEM private key: " + openssl_error());
    if (EVP_PKEY_get_id(pkey.get()) != EVP_PKEY_ED25519)
        return make_error(path.string() + ": the private key is not an Ed25519 key");
    auto public_raw = raw_public_key(pkey.get());
    if (!public_raw) return with_context(path.string(), public_raw.error());
    auto verify_key = VerifyKey::from_raw(*public_raw);
    if (!verify_key) return verify_key.error();
    return SigningKey(std::make_unique<Key>(Key{std::move(pkey)}), std::move(verify_key).value());
}

Status SigningKey::save_pem(const std::filesystem::path& path) const {
    BioPtr bio(BIO_new(BIO_s_mem()));
    if (!bio || PEM_write_bio_PrivateKey(bio.get(), key_->pkey.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1)
        return make_error("cannot encode Ed25519 private key: " + openssl_error());
    return write_file_atomic(path, as_bytes(bio_to_string(bio.get())), 0600);
}

Ed25519Signature SigningKey::sign(ByteView message) const {
    Ed25519Signature signature{};
    std::size_t length = signature.size();
    MdCtxPtr ctx(EVP_MD_CTX_new());
    if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_->pkey.get()) != 1 ||
        EVP_DigestSign(ctx.get(), signature.data(), &length, message.data(), message.size()) != 1)
        throw std::runtime_error("Ed25519 signing failed: " + openssl_error());
    return signature;
}

}  // namespace tessera::common
