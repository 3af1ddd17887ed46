// Signed envelopes: only the expected key and purpose open them; JSON form is strict.
#include <doctest/doctest.h>

#include <boost/json/serialize.hpp>

#include "json_strict.h"
#include "signed_envelope.h"

using namespace tessera::common;

TEST_CASE("an envelope opens with the signer's key and purpose") {
    auto key = SigningKey::generate();
    auto envelope = seal_envelope("{\"wu_id\":\"a\"}", "work_unit", key);
    auto payload = open_envelope(envelope, "work_unit", key.verify_key());
    REQUIRE(payload.ok());
    CHECK(*payload == "{\"wu_id\":\"a\"}");
}

TEST_CASE("wrong purpose, wrong key, altered payload or signature are refused") {
    auto key = SigningKey::generate();
    auto envelope = seal_envelope("payload", "work_unit", key);

    auto wrong_purpose = open_envelope(envelope, "result", key.verify_key());
    CHECK_FALSE(wrong_purpose.ok());

    auto other = SigningKey::generate();
    auto wrong_key = open_envelope(envelope, "work_unit", other.verify_key());
    CHECK_FALSE(wrong_key.ok());
    CHECK(wrong_key.message().find("not by the expected key") != std::string::npos);

    // A forger who copies the pinned key id still fails the signature check.
    auto forged = seal_envelope("payload", "work_unit", other);
    forged.key_id = key.verify_key().key_id();
    CHECK(open_envelope(forged, "work_unit", key.verify_key()).message().find("forged") != std::string::npos);

    auto altered = envelope;
    altered.payload += " ";
    CHECK_FALSE(open_envelope(altered, "work_unit", key.verify_key()).ok());
    altered = envelope;
    altered.signature[63] ^= 1;
    CHECK_FALSE(open_envelope(altered, "work_unit", key.verify_key()).ok());
}

TEST_CASE("JSON round trip, and malformed envelopes give named errors") {
    auto key = SigningKey::generate();
    auto envelope = seal_envelope(std::string("binary\0payload", 14), "work_unit", key);
    auto json = envelope_to_json(envelope);
    auto back = envelope_from_json(*parse_json_strict(boost::json::serialize(json)), "envelope");
    REQUIRE(back.ok());
    CHECK(back->payload == envelope.payload);
    CHECK(open_envelope(*back, "work_unit", key.verify_key()).ok());

    auto broken = json;
    broken.as_object()["signature"] = "AAAA";
    CHECK(envelope_from_json(broken, "envelope").message().find("envelope: field \"signature\"") == 0);
    broken = json;
    broken.as_object()["payload"] = "not base64!";
    CHECK(envelope_from_json(broken, "envelope").message().find("envelope.payload") == 0);
    broken = json;
    broken.as_object().erase("key_id");
    CHECK(envelope_from_json(broken, "envelope").message().find("missing field \"key_id\"") != std::string::npos);
    broken = json;
    broken.as_object()["extra"] = 1;
    CHECK(envelope_from_json(broken, "envelope").message().find("unknown field \"extra\"") != std::string::npos);
}
