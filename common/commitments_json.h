// The JSON form of a result's commitments (commitments.h; docs/protocol.md, "Commitments"):
// {every, segments: [{step, loss, norm, sketch[16]}], residual_in: {sha256, sketch[16]},
// residual_out: {…}}, every field required, 1 to 8 segments with rising steps, finite numbers,
// a residual without a hash sketched as zeros.
#pragma once

#include <boost/json/object.hpp>

#include <string_view>

#include "commitments.h"
#include "json_strict.h"

namespace tessera::common {

boost::json::object commitments_to_json(const Commitments& commitments);

// The object at `key` of `parent`; an error is recorded in `parent`.
Commitments read_commitments(JsonObjectReader& parent, std::string_view key);

// The commitments a server stored (the manifest's field as text).
Result<Commitments> parse_commitments(std::string_view json);

}  // namespace tessera::common
