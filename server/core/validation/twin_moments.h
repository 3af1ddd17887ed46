// Audit twins of kept units (docs/operations.md, "Audit twins"): a drawn result that resumed
// kept moments is computed again by a trusted volunteer from those moments, which its own
// volunteer sent for the audit; they are checked against its commitments and published as a
// blob the twin's unit names (`moments`, docs/protocol.md, "Moments for a twin"), and the blob
// goes once no open unit resumes it.
#pragma once

#include <optional>
#include <string>

#include "blob_store.h"
#include "commitments.h"
#include "records.h"
#include "result_files.h"
#include "store.h"
#include "task_config.h"

namespace tessera::server {

// Whether a result drawn for an audit is twinned from its moments instead of replayed by the
// server: a task audited by volunteers, an audit drawn at the upload (a flag's is the server's
// to settle), the moments received, a unit of one replica.
bool twinned_from_moments(const AssignmentRecord& assignment, const TaskConfig& config, const WorkUnitRecord& unit,
                          const ResultFiles& results);

// The moments the result's volunteer sent, stored as a blob for its twin; none, with why in
// `refusal`, when they do not parse or are not those its commitments name (nothing is stored).
common::Result<std::optional<common::BlobRef>> publish_twin_moments(const AssignmentRecord& assignment,
                                                                    const common::Commitments* commitments,
                                                                    const ResultFiles& results, BlobStore& blobs,
                                                                    std::string& refusal);

// The unit's twin moments removed from the blob store once no open unit resumes them.
common::Status drop_twin_moments(Store& store, BlobStore& blobs, const std::string& work_unit_id);

}  // namespace tessera::server
