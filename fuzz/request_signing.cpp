// A volunteer request's signing headers (four lines: client, timestamp, nonce, signature) and
// the signed envelope a work unit comes in (JSON).
#include <boost/json.hpp>

#include "ed25519.h"
#include "fuzz_target.h"
#include "json_strict.h"
#include "request_signing.h"
#include "signed_envelope.h"

using namespace tessera::common;

namespace {

const SigningKey& server_key() {
    static const SigningKey key = SigningKey::generate();
    return key;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    std::string lines[4];
    std::size_t at = 0;
    for (auto& line : lines) {
        auto end = text.find('\n', at);
        line = std::string(text.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at));
        at = end == std::string_view::npos ? text.size() : end + 1;
    }
    Ed25519Signature signature{};
    (void)parse_signed_headers({lines[0], lines[1], lines[2], lines[3]}, signature);
    if (auto json = parse_json_strict(text))
        if (auto envelope = envelope_from_json(*json, "envelope"))
            (void)open_envelope(*envelope, "work-unit", server_key().verify_key());
    return 0;
}

std::vector<Bytes> fuzz_seeds() {
    auto headers =
        sign_request("POST", "/api/v1/results", as_bytes(std::string_view("body")), "c-1", server_key(), 1'800'000'000);
    auto lines = headers.client_id + "\n" + headers.timestamp + "\n" + headers.nonce + "\n" + headers.signature;
    auto envelope = boost::json::serialize(envelope_to_json(seal_envelope("{}", "work-unit", server_key())));
    return {Bytes(lines.begin(), lines.end()), Bytes(envelope.begin(), envelope.end())};
}
