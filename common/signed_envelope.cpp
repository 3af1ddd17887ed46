// Signed envelopes: domain-separated Ed25519 over the payload bytes.
#include "signed_envelope.h"

#include "bytes.h"
#include "json_strict.h"
#include "text_encoding.h"

namespace tessera::common {
namespace {

constexpr std::size_t kMaxPayloadBase64 = kMiB;

std::string signed_message(std::string_view purpose, std::string_view payload) {
    std::string message = "tessera/v1/";
    message += purpose;
    message.push_back('\0');
    message += payload;
    return message;
}

}  // namespace

SignedEnvelope seal_envelope(std::string payload, std::string_view purpose, const SigningKey& key) {
    SignedEnvelope envelope;
    envelope.key_id = key.verify_key().key_id();
    envelope.signature = key.sign(as_bytes(signed_message(purpose, payload)));
    envelope.payload = std::move(payload);
    return envelope;
}

Result<std::string> open_envelope(const SignedEnvelope& envelope, std::string_view purpose, const VerifyKey& key) {
    if (envelope.key_id != key.key_id())
        return make_error("envelope is signed by key " + envelope.key_id + ", not by the expected key " + key.key_id());
    if (!key.verify(as_bytes(signed_message(purpose, envelope.payload)), envelope.signature))
        return make_error("envelope signature is not valid for its payload (forged or altered)");
    return envelope.payload;
}

boost::json::value envelope_to_json(const SignedEnvelope& envelope) {
    return {{"key_id", envelope.key_id},
            {"payload", to_base64(as_bytes(envelope.payload))},
            {"signature", to_base64(envelope.signature)}};
}

Result<SignedEnvelope> envelope_from_json(const boost::json::value& json, const std::string& path) {
    JsonObjectReader reader(json, path);
    SignedEnvelope envelope;
    envelope.key_id = reader.lower_hex("key_id", kKeyIdHexLength);
    auto payload = reader.string("payload", 0, kMaxPayloadBase64);
    auto signature = reader.string("signature", kEd25519SignatureBase64Length, kEd25519SignatureBase64Length);
    if (auto status = reader.finish(); !status) return status.error();
    auto payload_bytes = from_base64(payload);
    if (!payload_bytes) return make_error(path + ".payload: " + payload_bytes.message());
    auto signature_bytes = from_base64(signature);
    if (!signature_bytes || signature_bytes->size() != kEd25519SignatureBytes)
        return make_error(path + ".signature: expected 64 bytes in base64");
    envelope.payload.assign(payload_bytes->begin(), payload_bytes->end());
    std::copy(signature_bytes->begin(), signature_bytes->end(), envelope.signature.begin());
    return envelope;
}

}  // namespace tessera::common
