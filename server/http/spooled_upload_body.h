// The Beast body type of a result upload: the HTTP session converts its parser to it once the
// header has passed its checks, and the body is spooled to disk as it arrives (upload_spool.h).
#pragma once

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/optional.hpp>

#include "upload_spool.h"

namespace tessera::server {

struct SpooledUploadBody {
    using value_type = SpooledUpload;

    class reader {
    public:
        template <bool isRequest, class Fields>
        reader(boost::beast::http::header<isRequest, Fields>&, value_type& body) : writer_(body) {}

        // Never an error for Beast: what went wrong is in the body's `error`, answered once the
        // whole body has arrived.
        void init(const boost::optional<std::uint64_t>&, boost::system::error_code& error) {
            error = {};
            writer_.open();
        }
        template <class ConstBufferSequence>
        std::size_t put(const ConstBufferSequence& buffers, boost::system::error_code& error) {
            error = {};
            std::size_t taken = 0;
            for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers);
                 ++it) {
                boost::asio::const_buffer buffer = *it;
                writer_.write(static_cast<const std::uint8_t*>(buffer.data()), buffer.size());
                taken += buffer.size();
            }
            return taken;
        }
        void finish(boost::system::error_code& error) {
            error = {};
            writer_.finish();
        }

    private:
        SpoolWriter writer_;
    };
};

}  // namespace tessera::server
