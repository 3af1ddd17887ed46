// Runs a job on the server's work pool (validations, evaluations); work_pool.h makes one.
#pragma once

#include <functional>

namespace tessera::server {

using Executor = std::function<void(std::function<void()>)>;

}  // namespace tessera::server
