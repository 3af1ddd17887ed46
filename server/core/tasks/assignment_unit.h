// The work unit an assignment was sent as, read back from the signed envelope stored with
// it: the exact encoding, hyperparameters, seed and shards the volunteer was given.
#pragma once

#include "protocol.h"
#include "records.h"
#include "result.h"

namespace tessera::server {

common::Result<common::WorkUnit> sent_work_unit(const AssignmentRecord& assignment);

}  // namespace tessera::server
