// A Beast body that sends `length` bytes of an open file from `offset`, read in 64 KiB
// pieces as the socket takes them: a blob response, whole or a Range of it, never holds more
// than one piece in memory (Beast's file_body sends only from the start to the end). The file
// comes from the server's FileSystem, so a disk that fails mid-download is the test's to choose.
#pragma once

#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>

#include "file_system.h"

namespace tessera::server {

struct FileRangeBody {
    struct value_type {
        std::unique_ptr<ReadableFile> file;
        std::uint64_t offset = 0;
        std::uint64_t length = 0;
    };

    static std::uint64_t size(const value_type& body) { return body.length; }

    class writer {
    public:
        using const_buffers_type = boost::asio::const_buffer;

        template <bool isRequest, class Fields>
        writer(boost::beast::http::header<isRequest, Fields>&, value_type& body)
            : body_(body), next_(body.offset), remain_(body.length) {}

        void init(boost::beast::error_code& error) { error = {}; }

        boost::optional<std::pair<const_buffers_type, bool>> get(boost::beast::error_code& error) {
            error = {};
            if (remain_ == 0) return boost::none;
            auto want = static_cast<std::size_t>(std::min<std::uint64_t>(remain_, piece_.size()));
            auto got = body_.file->read_at(next_, std::span<char>(piece_.data(), want));
            // A failed read or a file that shrank under us (blobs are immutable: damage) ends
            // the response short; the client sees the connection close before its length.
            if (!got || *got == 0) {
                error = boost::beast::http::error::short_read;
                return boost::none;
            }
            next_ += *got;
            remain_ -= *got;
            return {{const_buffers_type(piece_.data(), *got), remain_ > 0}};
        }

    private:
        value_type& body_;
        std::uint64_t next_;
        std::uint64_t remain_;
        std::array<char, 64 << 10> piece_;
    };
};

}  // namespace tessera::server
