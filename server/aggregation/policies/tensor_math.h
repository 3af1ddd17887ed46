// Norms, layout checks and scaling over NamedTensors: the arithmetic the merge policies share.
#pragma once

#include "delta_codec.h"
#include "result.h"

namespace tessera::server {

// L2 norm over all values of all tensors, accumulated in double.
double l2_norm(const common::NamedTensors& tensors);

// ‖a − b‖ / max(‖a‖, ‖b‖, 1e-12); an error when the layouts differ (see check_same_layout).
common::Result<double> relative_l2(const common::NamedTensors& a, const common::NamedTensors& b);

// OK when `other` has the model's tensor names in the same order, equal shapes and value
// counts; otherwise an error naming the first difference ("tensor 'x': shape [2,3] differs
// from the model's [3,2]", "missing tensor 'y'", "unexpected tensor 'z'").
common::Status check_same_layout(const common::NamedTensors& model, const common::NamedTensors& other);

void scale_in_place(common::NamedTensors& tensors, double factor);

// `base` + `delta`, value by value (the same layout: check_same_layout).
common::NamedTensors applied(const common::NamedTensors& base, const common::NamedTensors& delta);

// Scales `delta` down so its L2 norm is at most max_norm (max_norm ≤ 0: no clipping).
// Returns the factor applied (1 when unchanged).
double clip_norm_in_place(common::NamedTensors& delta, double max_norm);

}  // namespace tessera::server
