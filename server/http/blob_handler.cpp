// Blob responses with ranges and validators.
#include "blob_handler.h"

#include <charconv>

#include "file_range_body.h"
#include "logger.h"
#include "sha256.h"
#include "text_encoding.h"

namespace tessera::server {
namespace {

bool parse_number(std::string_view text, std::uint64_t& value) {
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    return !text.empty() && error == std::errc() && end == text.data() + text.size();
}

}  // namespace

common::Result<std::optional<ByteRange>> parse_byte_range(std::string_view header, std::uint64_t size) {
    constexpr std::string_view kPrefix = "bytes=";
    // Other units and multi-range requests are allowed to be ignored (RFC 9110 §14.2).
    if (!header.starts_with(kPrefix) || header.find(',') != std::string_view::npos) return std::optional<ByteRange>();
    auto spec = header.substr(kPrefix.size());
    auto dash = spec.find('-');
    if (dash == std::string_view::npos) return std::optional<ByteRange>();
    auto first_text = spec.substr(0, dash);
    auto last_text = spec.substr(dash + 1);
    ByteRange range;
    if (first_text.empty()) {  // suffix: the last N bytes
        std::uint64_t count = 0;
        if (!parse_number(last_text, count)) return std::optional<ByteRange>();
        if (count == 0 || size == 0) return common::make_error("unsatisfiable range");
        range.first = count >= size ? 0 : size - count;
        range.last = size - 1;
        return std::optional<ByteRange>(range);
    }
    if (!parse_number(first_text, range.first)) return std::optional<ByteRange>();
    if (last_text.empty()) {
        range.last = size == 0 ? 0 : size - 1;
    } else if (!parse_number(last_text, range.last) || range.last < range.first) {
        return std::optional<ByteRange>();
    }
    if (range.first >= size) return common::make_error("unsatisfiable range");
    if (range.last >= size) range.last = size - 1;
    return std::optional<ByteRange>(range);
}

namespace {

// The headers of every blob response: immutable, named by its hash, ranges accepted.
template <class Message>
void set_blob_headers(Message& response, const Request& request, const std::string& etag) {
    response.set(http::field::server, "tessera-server");
    response.set(http::field::etag, etag);
    response.set(http::field::cache_control, kImmutableCacheControl);
    response.set(http::field::accept_ranges, "bytes");
    response.set(http::field::content_type, "application/octet-stream");
    response.keep_alive(request.keep_alive());
}

Response unsatisfiable(const Request& request, const std::string& etag, std::uint64_t size) {
    auto response = http::response<http::string_body>{http::status::range_not_satisfiable, request.version()};
    set_blob_headers(response, request, etag);
    response.set(http::field::content_range, "bytes */" + std::to_string(size));
    response.prepare_payload();
    return response;
}

// 200 with the whole blob or 206 with `range` of it; for HEAD, the headers alone.
Response blob_content(const Request& request, const std::string& etag, std::unique_ptr<ReadableFile> file,
                      const std::optional<ByteRange>& range) {
    auto size = file->size();
    auto status = range ? http::status::partial_content : http::status::ok;
    std::uint64_t first = range ? range->first : 0;
    std::uint64_t length = range ? range->last - range->first + 1 : size;
    auto finish = [&](auto& response) {
        set_blob_headers(response, request, etag);
        if (range)
            response.set(http::field::content_range, "bytes " + std::to_string(first) + "-" +
                                                         std::to_string(range->last) + "/" + std::to_string(size));
        response.content_length(length);
    };
    if (request.method() == http::verb::head) {
        http::response<http::empty_body> response{status, request.version()};
        finish(response);
        return response;
    }
    FileRangeBody::value_type body{std::move(file), first, length};
    http::response<FileRangeBody> response{std::piecewise_construct, std::make_tuple(std::move(body)),
                                           std::make_tuple(status, request.version())};
    finish(response);
    return response;
}

}  // namespace

Response serve_blob(const Request& request, const BlobStore& blobs, std::string_view sha256) {
    if (!common::is_lower_hex(sha256, common::kSha256HexLength))
        return error_response(request, http::status::bad_request, "bad_request",
                              "blob names are 64 lowercase hex digits");
    std::string name(sha256);
    auto file = blobs.open(name);
    if (!file) {
        if (!blobs.has(name)) return error_response(request, http::status::not_found, "not_found", "no blob " + name);
        common::process_log().error("blob_read", "serving blob " + name + ": " + file.message());
        return internal_error(request, "the server cannot read the blob " + name + " now; try again later");
    }
    std::string etag = "\"" + name + "\"";
    if (request[http::field::if_none_match] == etag) {
        http::response<http::empty_body> response{http::status::not_modified, request.version()};
        set_blob_headers(response, request, etag);
        return response;
    }
    std::optional<ByteRange> range;
    if (auto header = request[http::field::range]; !header.empty()) {
        auto parsed = parse_byte_range(header, (*file)->size());
        if (!parsed) return unsatisfiable(request, etag, (*file)->size());
        range = *parsed;
    }
    return blob_content(request, etag, std::move(*file), range);
}

}  // namespace tessera::server
