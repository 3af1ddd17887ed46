// Downlink model patches (docs/tensor_format.md, "Model patches"). Version v's published
// model θ̂_v is θ̂_{v−1} plus its decoded patch. The server encodes the difference between its
// true model θ and θ̂, so whatever the encoding leaves out is sent by later patches (error
// feedback on the server's side) and the volunteers' copies never drift: a volunteer that
// applies the same patches to the same bytes gets the same bytes, which the work unit's
// model hash confirms.
#pragma once

#include "bytes.h"
#include "delta_codec.h"
#include "result.h"

namespace tessera::common {

// The patch that takes `published` towards `target` (same names and shapes, sorted by name):
// a zstd frame holding a delta file in `encoding`. `published` is advanced by exactly what
// the patch holds.
Result<Bytes> make_patch(const NamedTensors& target, NamedTensors& published, const DeltaEncoding& encoding);

// Adds a patch (untrusted bytes) to `model` in place. A patch that does not decode, or whose
// names or shapes differ from the model's, is a named error and leaves `model` unchanged.
Status apply_patch(NamedTensors& model, ByteView patch);

}  // namespace tessera::common
