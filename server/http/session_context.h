// What a server's HTTP sessions share (http_server.cpp and the session parts beside it).
#pragma once

#include <boost/asio/thread_pool.hpp>

#include "api.h"
#include "connection_drain.h"
#include "http_server.h"
#include "upload_slots.h"

namespace tessera::server {

// What every session shares; kept alive by each session, so it outlives the HttpServer object.
struct SessionContext {
    SessionContext(boost::asio::thread_pool& pool, Api& the_api, HttpSettings the_settings)
        : handlers(pool), api(the_api), settings(std::move(the_settings)),
          uploads(settings.upload_spool_bytes, settings.max_uploads_per_client, the_api.metrics()) {}
    boost::asio::thread_pool& handlers;
    Api& api;
    HttpSettings settings;
    ConnectionDrain drain;
    UploadSlots uploads;
};

}  // namespace tessera::server
