// ClientState: small JSON files written atomically.
#include "client_state.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include <boost/json.hpp>

#include <sys/stat.h>

#include "bytes.h"
#include "file_io.h"
#include "json_strict.h"
#include "protocol.h"
#include "sha256.h"
#include "text_encoding.h"

namespace tessera::client {
namespace {

common::Result<std::optional<boost::json::value>> read_json(const std::filesystem::path& path) {
    std::error_code error;
    if (!std::filesystem::exists(path, error)) return std::optional<boost::json::value>();
    auto bytes = common::read_file(path, common::JsonLimits{}.max_bytes);
    if (!bytes) return bytes.error();
    auto json = common::parse_json_strict(common::as_string_view(*bytes));
    if (!json) return common::with_context(path.string(), json.error());
    return std::optional<boost::json::value>(std::move(*json));
}

}  // namespace

common::Result<common::SigningKey> ClientState::load_or_create_key() const {
    auto path = root_ / "client_key.pem";
    std::error_code error;
    if (std::filesystem::exists(path, error)) return common::SigningKey::load_pem(path);
    std::filesystem::create_directories(root_, error);
    if (error) return common::make_error("cannot create " + root_.string() + ": " + error.message());
    ::chmod(root_.c_str(), 0700);
    auto key = common::SigningKey::generate();
    if (auto status = key.save_pem(path); !status) return status.error();
    return key;
}

common::Result<std::optional<Identity>> ClientState::load_identity() const {
    auto json = read_json(root_ / "identity.json");
    if (!json) return json.error();
    if (!*json) return std::optional<Identity>();
    common::JsonObjectReader reader(**json, "identity");
    Identity identity{reader.string("server", 1), reader.string("client_id", 1, common::kMaxIdentifier),
                      reader.string("server_public_key", common::kEd25519PublicKeyBase64Length,
                                    common::kEd25519PublicKeyBase64Length),
                      reader.string("server_key_id", common::kKeyIdHexLength, common::kKeyIdHexLength)};
    if (auto status = reader.finish(); !status) return status.error();
    return std::optional<Identity>(identity);
}

common::Status ClientState::save_identity(const Identity& identity) const {
    boost::json::object json{{"server", identity.server},
                             {"client_id", identity.client_id},
                             {"server_public_key", identity.server_public_key},
                             {"server_key_id", identity.server_key_id}};
    return common::write_file_atomic(root_ / "identity.json", common::as_bytes(boost::json::serialize(json)), 0600);
}

common::Result<std::optional<CurrentWork>> ClientState::load_work(const std::string& file) const {
    auto json = read_json(root_ / file);
    if (!json) return json.error();
    if (!*json) return std::optional<CurrentWork>();
    common::JsonObjectReader reader(**json, file);
    CurrentWork work{reader.string("envelope", 1, common::kMiB), reader.string("wu_id", 1, common::kMaxIdentifier),
                     reader.one_of("phase", {"training", "uploading", "ahead"})};
    if (auto status = reader.finish(); !status) return status.error();
    return std::optional<CurrentWork>(work);
}

common::Status ClientState::save_work(const std::string& file, const CurrentWork& work) const {
    boost::json::object json{{"envelope", work.envelope_json}, {"wu_id", work.wu_id}, {"phase", work.phase}};
    return common::write_file_atomic(root_ / file, common::as_bytes(boost::json::serialize(json)));
}

common::Result<std::optional<CurrentWork>> ClientState::load_current() const { return load_work("current.json"); }

common::Status ClientState::save_current(const CurrentWork& work) const { return save_work("current.json", work); }

common::Result<std::optional<CurrentWork>> ClientState::load_next() const { return load_work("next.json"); }

common::Status ClientState::save_next(const CurrentWork& work) const { return save_work("next.json", work); }

common::Status ClientState::hand_over_upload() const {
    // The delta first: a crash in between leaves a record without its result, which is given back.
    std::error_code error;
    std::filesystem::rename(delta_file(), uploading_delta_file(), error);
    if (!error) std::filesystem::rename(root_ / "current.json", root_ / "uploading.json", error);
    if (error) return common::make_error("cannot set the result aside for its upload: " + error.message());
    return {};
}

common::Result<std::optional<CurrentWork>> ClientState::load_uploading() const { return load_work("uploading.json"); }

void ClientState::clear_uploading() const {
    std::error_code ignored;
    std::filesystem::remove(root_ / "uploading.json", ignored);
    std::filesystem::remove(uploading_delta_file(), ignored);
}

common::Status ClientState::keep_moments_in(const std::string& wu_id, const std::filesystem::path& from) const {
    std::error_code error;
    std::filesystem::create_directories(moments_in_dir(), error);
    if (error) return common::make_error("creating " + moments_in_dir().string() + ": " + error.message());
    auto day_ago = std::filesystem::file_time_type::clock::now() - std::chrono::hours(24);
    std::vector<std::pair<std::filesystem::file_time_type, std::filesystem::path>> others;
    for (const auto& entry : std::filesystem::directory_iterator(moments_in_dir(), error)) {
        std::error_code old;
        auto written = entry.last_write_time(old);
        if (old) continue;
        if (written < day_ago)
            std::filesystem::remove(entry.path(), old);
        else
            others.emplace_back(written, entry.path());
    }
    // The newest kMaxKeptMoments - 1 stay beside this one: older results are decided by now.
    std::sort(others.begin(), others.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    for (std::size_t i = kMaxKeptMoments - 1; i < others.size(); ++i) std::filesystem::remove(others[i].second, error);
    auto kept = moments_in_file(wu_id);
    std::filesystem::remove(kept, error);
    std::filesystem::create_hard_link(from.empty() ? optimizer_file() : from, kept, error);
    if (error) return common::make_error("keeping the moments " + wu_id + " started from: " + error.message());
    return {};
}

void ClientState::clear_next() const {
    std::error_code ignored;
    std::filesystem::remove(root_ / "next.json", ignored);
}

void ClientState::clear_current() const {
    std::error_code ignored;
    std::filesystem::remove(root_ / "current.json", ignored);
    std::filesystem::remove(delta_file(), ignored);
}

common::Result<Remembered> ClientState::load_remembered() const {
    auto json = read_json(root_ / "remembered.json");
    if (!json) return json.error();
    Remembered remembered;
    if (!*json) return remembered;
    common::JsonObjectReader reader(**json, "remembered");
    remembered.samples_per_s = reader.number("samples_per_s", 0, 1e12);
    if (const auto* shards = reader.field("shards")) {
        if (!shards->is_array())
            reader.fail("field \"shards\": expected an array");
        else
            for (const auto& shard : shards->as_array()) {
                if (!shard.is_string() || !common::is_lower_hex(shard.as_string(), common::kSha256HexLength))
                    return common::make_error("remembered.json: shards: not a SHA-256 hex string");
                remembered.shards.emplace_back(shard.as_string());
            }
    }
    if (reader.has("model")) {  // files from before downlink patches lack it
        remembered.model = reader.string("model", 0, common::kSha256HexLength);
        if (!remembered.model.empty() && !common::is_lower_hex(remembered.model, common::kSha256HexLength))
            return common::make_error("remembered.json: model: not a SHA-256 hex string");
    }
    if (auto status = reader.finish(); !status) return common::with_context("remembered.json", status.error());
    return remembered;
}

common::Status ClientState::save_remembered(const Remembered& remembered) const {
    boost::json::array shards;
    for (const auto& shard : remembered.shards)
        if (shards.size() < kMaxRememberedShards) shards.emplace_back(shard);
    boost::json::object json{
        {"shards", std::move(shards)}, {"samples_per_s", remembered.samples_per_s}, {"model", remembered.model}};
    return common::write_file_atomic(root_ / "remembered.json", common::as_bytes(boost::json::serialize(json)));
}

}  // namespace tessera::client
