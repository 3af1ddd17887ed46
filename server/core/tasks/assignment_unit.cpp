// Parsing the stored envelope: it was written by this server, so a failure is the server's.
#include "assignment_unit.h"

#include "json_strict.h"
#include "signed_envelope.h"

namespace tessera::server {

common::Result<common::WorkUnit> sent_work_unit(const AssignmentRecord& assignment) {
    auto json = common::parse_json_strict(assignment.envelope_json);
    if (!json) return common::with_context("stored envelope of " + assignment.id, json.error());
    auto envelope = common::envelope_from_json(*json, "envelope");
    if (!envelope) return common::with_context("stored envelope of " + assignment.id, envelope.error());
    return common::parse_message<common::WorkUnit>(envelope->payload);
}

}  // namespace tessera::server
