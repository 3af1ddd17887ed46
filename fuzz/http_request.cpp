// A request's header as the server reads it: the target's path and query parameters, and a
// blob request's Range header against files of several sizes.
#include <boost/beast/http.hpp>

#include <limits>

#include "blob_handler.h"
#include "fuzz_target.h"
#include "http_types.h"

using namespace tessera;
namespace http = boost::beast::http;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    http::request_parser<http::empty_body> parser;
    parser.header_limit(8 << 10);
    boost::system::error_code error;
    parser.put(boost::asio::buffer(data, size), error);
    if (!parser.is_header_done()) return 0;
    const auto& header = parser.get();
    auto target = std::string_view(header.target());
    (void)server::path_of(target);
    (void)server::query_integer(target, "after", 0, 0, std::int64_t{1} << 53);
    (void)server::query_number(target, "value", -1);
    auto range = std::string_view(header[http::field::range]);
    for (std::uint64_t file_size :
         {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{1000}, std::numeric_limits<std::uint64_t>::max()})
        if (auto parsed = server::parse_byte_range(range, file_size); parsed && *parsed) {
            if ((*parsed)->first > (*parsed)->last || (*parsed)->last >= file_size)
                __builtin_trap();  // out of the file
        }
    return 0;
}

std::vector<common::Bytes> fuzz_seeds() {
    std::vector<std::string> requests = {
        "GET /blobs/" + std::string(64, 'a') + " HTTP/1.1\r\nHost: x\r\nRange: bytes=0-99\r\n\r\n",
        "GET /blobs/" + std::string(64, 'b') + " HTTP/1.1\r\nRange: bytes=-500\r\nIf-None-Match: \"x\"\r\n\r\n",
        "GET /api/v1/events?after=12&limit=5 HTTP/1.1\r\nHost: x\r\n\r\n",
        "POST /api/v1/admin/tasks/t-1/weight?value=2.5 HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        "GET /api/v1/history?bucket=60&buckets=120 HTTP/1.0\r\nRange: bytes=10-\r\n\r\n"};
    std::vector<common::Bytes> seeds;
    for (const auto& request : requests) seeds.emplace_back(request.begin(), request.end());
    return seeds;
}
