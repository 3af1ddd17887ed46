// The Beast body type of a result upload: the HTTP session converts its parser to it once the
// header has passed its checks. On the I/O thread it only collects the bytes read into
// SpooledUpload::received; the session hands them to the spool (hashing, disk) on the handler
// pool (upload_session.h).
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
        reader(boost::beast::http::header<isRequest, Fields>&, value_type& body) : body_(body) {}

        void init(const boost::optional<std::uint64_t>&, boost::system::error_code& error) { error = {}; }
        template <class ConstBufferSequence>
        std::size_t put(const ConstBufferSequence& buffers, boost::system::error_code& error) {
            error = {};
            std::size_t taken = 0;
            for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers);
                 ++it) {
                boost::asio::const_buffer buffer = *it;
                const auto* bytes = static_cast<const std::uint8_t*>(buffer.data());
                body_.received.insert(body_.received.end(), bytes, bytes + buffer.size());
                taken += buffer.size();
            }
            return taken;
        }
        void finish(boost::system::error_code& error) { error = {}; }

    private:
        value_type& body_;
    };
};

}  // namespace tessera::server
