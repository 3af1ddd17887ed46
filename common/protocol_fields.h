// The protocol messages' fields read and written as JSON (protocol.cpp builds the messages from
// them): identifiers, printable text, keys, blob references and URLs, delta encodings, a unit's
// hyperparameters and a result's metrics. Each reader records its first error in the reader
// it is given (JsonObjectReader), so a message reports one clear error with its field's path.
#pragma once

#include <boost/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "json_strict.h"
#include "protocol.h"

namespace tessera::common::protocol_fields {

// An id field: 1–64 characters of [A-Za-z0-9_-].
std::string read_identifier(JsonObjectReader& reader, std::string_view key);
// An optional array of at most `max` identifiers; empty when absent.
std::vector<std::string> read_identifiers(JsonObjectReader& reader, std::string_view key, std::size_t max);
boost::json::array identifiers_to_json(const std::vector<std::string>& names);
std::string read_printable(JsonObjectReader& reader, std::string_view key, std::size_t min, std::size_t max);
std::string read_public_key(JsonObjectReader& reader, std::string_view key);
// "" or an http(s) URL of printable ASCII without a trailing slash (docs/protocol.md).
std::string read_blob_base_url(JsonObjectReader& reader);
boost::json::value blob_to_json(const BlobRef& blob);
BlobRef read_blob(const boost::json::value& json, const std::string& path, JsonObjectReader& parent);
BlobRef read_blob_field(JsonObjectReader& parent, std::string_view key);
// An optional field holding "" or a SHA-256 hex digest; absent reads as "".
std::string read_optional_sha256(JsonObjectReader& reader, std::string_view key);
// An optional array of at most `max` blobs; absent reads as empty.
std::vector<BlobRef> read_blob_list(JsonObjectReader& reader, std::string_view key, std::size_t max);
boost::json::value encoding_to_json(const DeltaEncoding& encoding);
DeltaEncoding read_encoding(JsonObjectReader& parent, std::string_view key);
// The optional fields are written only when set, so a unit without them keeps the bytes
// older clients sign and read.
boost::json::object hyper_to_json(const Hyperparameters& h);
Hyperparameters read_hyper(JsonObjectReader& parent, std::string_view key);
TrainMetrics read_metrics(JsonObjectReader& parent, std::string_view key);

template <class T>
Result<T> finish(JsonObjectReader& reader, T message) {
    if (auto status = reader.finish(); !status) return status.error();
    return message;
}

}  // namespace tessera::common::protocol_fields
