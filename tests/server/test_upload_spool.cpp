// Upload bodies spooled to disk piece by piece as the HTTP session hands over what Beast read
// (and whole, as the in-process server spools them): the manifest in memory, the delta in a
// spool file, both hashes computed on the way; bad framing and a missing directory refused.
#include <boost/beast/http.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "delta_codec.h"
#include "file_io.h"
#include "result_files.h"
#include "result_upload.h"
#include "sha256.h"
#include "spooled_upload_body.h"
#include "temp_dir.h"

using namespace tessera;
using server::SpooledUploadBody;
namespace http = boost::beast::http;

namespace {

std::string request_with_body(const common::Bytes& body) {
    return "POST /api/v1/results HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
           std::string(body.begin(), body.end());
}

// Feeds `wire` to a parser `piece` bytes at a time, as a socket would, spooling what each piece
// brought (as the session does on the handler pool); the first error, if any.
boost::system::error_code parse(http::request_parser<SpooledUploadBody>& parser, const std::string& wire,
                                std::size_t piece) {
    server::SpoolWriter writer(parser.get().body());
    std::string pending;
    for (std::size_t at = 0; at < wire.size() && !parser.is_done(); at += piece) {
        pending += wire.substr(at, piece);
        while (!pending.empty() && !parser.is_done()) {  // the header is taken whole, the body as it comes
            boost::system::error_code error;
            auto used = parser.put(boost::asio::buffer(pending), error);
            if (error == http::error::need_more) error = {};
            if (error) return error;
            pending.erase(0, used);
            writer.spool_received();
            if (used == 0) break;
        }
    }
    if (!parser.is_done()) {
        boost::system::error_code error;
        parser.put_eof(error);
        return error;
    }
    writer.finish();
    return {};
}

std::size_t files_in(const std::filesystem::path& dir) {
    std::size_t count = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++count;
    return count;
}

}  // namespace

TEST_CASE("an upload arriving in pieces: the manifest kept, the delta spooled, both hashes computed") {
    testing::TempDir dir;
    common::Bytes delta(100'000);
    for (std::size_t i = 0; i < delta.size(); ++i) delta[i] = static_cast<std::uint8_t>(i * 7919 % 251);
    const std::string manifest = R"({"wu_id": "a-1"})";
    auto body = common::pack_result_upload(manifest, delta);
    for (std::size_t piece : {std::size_t{1}, std::size_t{7}, std::size_t{4096}}) {
        CAPTURE(piece);
        std::filesystem::path spooled;
        {
            http::request_parser<SpooledUploadBody> parser;
            parser.body_limit(1 << 20);
            parser.get().body().directory = dir.path();
            REQUIRE(!parse(parser, request_with_body(body), piece));
            auto& upload = parser.get().body();
            CHECK(upload.error.empty());
            CHECK(upload.manifest_json == manifest);
            CHECK(upload.delta_bytes == delta.size());
            CHECK(upload.delta_sha256 == common::sha256_hex(delta));
            CHECK(upload.body_sha256 == common::sha256_hex(body));
            spooled = upload.delta_file();
            CHECK(spooled.parent_path() == dir.path());
            CHECK(common::temp_file_writer(spooled.filename().string()).has_value());  // an orphan after a crash
            CHECK(common::read_file(spooled, 1 << 20).value() == delta);
        }
        CHECK_FALSE(std::filesystem::exists(spooled));  // not taken: removed with the upload
    }

    // Taken, the spool file stays for the caller to move into place.
    http::request_parser<SpooledUploadBody> parser;
    parser.get().body().directory = dir.path();
    REQUIRE(!parse(parser, request_with_body(body), 512));
    auto request = parser.release();
    auto taken = request.body().take_delta_file();
    { auto dropped = std::move(request); }
    CHECK(std::filesystem::exists(taken));
    CHECK(files_in(dir.path()) == 1);
}

TEST_CASE("a malformed upload body is refused as the volunteer's fault; a missing spool directory as the server's") {
    testing::TempDir dir;
    // Read to its end all the same (the sender is still writing it), with the reason kept.
    auto refusal = [&](const common::Bytes& body, const std::filesystem::path& where) {
        http::request_parser<SpooledUploadBody> parser;
        parser.get().body().directory = where;
        CHECK_FALSE(parse(parser, request_with_body(body), 3));
        CHECK(parser.is_done());
        CHECK(parser.get().body().body_sha256 == common::sha256_hex(body));  // the signature is checked first
        auto upload = std::move(parser.get().body());
        return std::pair(upload.error, upload.disk_error);
    };
    auto [zero_length, zero_disk] = refusal({0, 0, 0, 0, '{', '}'}, dir.path());
    CHECK(zero_length.find("manifest length 0 is outside") != std::string::npos);
    CHECK_FALSE(zero_disk);
    auto [huge, huge_disk] = refusal({0xff, 0xff, 0xff, 0x7f, 'x'}, dir.path());
    CHECK(huge.find("is outside 1..65536") != std::string::npos);
    CHECK_FALSE(huge_disk);
    auto [short_prefix, short_disk] = refusal({1, 0}, dir.path());
    CHECK(short_prefix.find("shorter than its 4-byte length prefix") != std::string::npos);
    CHECK_FALSE(short_disk);
    auto [short_manifest, manifest_disk] = refusal({9, 0, 0, 0, '{', '}'}, dir.path());
    CHECK(short_manifest.find("manifest length 9 exceeds the body") != std::string::npos);
    CHECK_FALSE(manifest_disk);
    CHECK(files_in(dir.path()) == 0);  // nothing left behind

    auto [missing, missing_disk] = refusal(common::pack_result_upload("{}", common::Bytes(10)), dir.path() / "absent");
    CHECK(missing.find("cannot create") != std::string::npos);
    CHECK(missing_disk);
}

TEST_CASE("a whole body spooled at once (the in-process server's uploads) is split as one read in pieces") {
    testing::TempDir dir;
    common::Bytes delta(5000);
    for (std::size_t i = 0; i < delta.size(); ++i) delta[i] = static_cast<std::uint8_t>(i % 13);
    auto body = common::pack_result_upload(R"({"wu_id": "a-2"})", delta);
    std::filesystem::path spooled;
    {
        auto upload = server::spool_upload(body, dir.path(), server::posix_file_system());
        CHECK(upload.error.empty());
        CHECK(upload.manifest_json == R"({"wu_id": "a-2"})");
        CHECK(upload.delta_sha256 == common::sha256_hex(delta));
        CHECK(upload.body_sha256 == common::sha256_hex(body));
        spooled = upload.delta_file();
        CHECK(common::read_file(spooled, 1 << 20).value() == delta);
    }
    CHECK_FALSE(std::filesystem::exists(spooled));
    auto refused = server::spool_upload(common::Bytes{1, 0}, dir.path(), server::posix_file_system());
    CHECK(refused.error == common::kUploadTooShort);
    CHECK_FALSE(refused.disk_error);
}

TEST_CASE("a decoded delta kept for the merge is read once, in place of the file; removing drops it; bounded") {
    testing::TempDir dir;
    std::filesystem::create_directories(dir.path() / "results");
    server::ResultFiles results{server::StateDir(dir.path()), server::posix_file_system(), 64};  // 16 floats
    common::NamedTensors delta{{"w", {2}, {0.5f, -0.25f}}};
    auto encoded = common::encode_delta(delta, {common::DeltaDType::F32, 1.0}).value();
    REQUIRE(results.write("a-1", encoded.bytes));
    REQUIRE(results.write("a-2", encoded.bytes));

    common::NamedTensors kept{{"w", {2}, {9.0f, 9.0f}}};  // not the file's values: shows which was read
    auto keep = [&](const std::string& id, common::NamedTensors tensors) {
        results.keep_decoded(id, common::DecodedDelta{{common::DeltaDType::F32, 1.0}, std::move(tensors), 0});
    };
    keep("a-1", kept);
    auto decodes = server::result_deltas_decoded();
    // A replica comparison reads it with the decoder's figures and leaves it for the merge.
    CHECK(results.read_decoded("a-1", 10).value().tensors.at(0).values == kept.at(0).values);
    CHECK(results.read("a-1", 10).value().at(0).values == kept.at(0).values);
    CHECK(server::result_deltas_decoded() == decodes);                          // no decode
    CHECK(results.read("a-1", 10).value().at(0).values == delta.at(0).values);  // kept for one read
    CHECK(server::result_deltas_decoded() == decodes + 1);

    keep("a-2", kept);
    results.remove("a-2");  // refused, or merged elsewhere: the kept form goes with the file
    CHECK(!results.read("a-2", 10).ok());

    // One delta over the bound is not kept; the oldest give way to new ones.
    common::NamedTensors huge{{"w", {17}, std::vector<float>(17, 1.0f)}};
    keep("a-1", std::move(huge));
    CHECK(results.read("a-1", 10).value().at(0).values == delta.at(0).values);
    common::NamedTensors half{{"w", {8}, std::vector<float>(8, 2.0f)}};
    keep("a-1", half);
    keep("a-3", half);
    keep("a-4", half);  // over the bound: a-1's goes
    CHECK(results.read("a-1", 10).value().at(0).values == delta.at(0).values);
}
