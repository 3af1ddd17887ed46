// Images from a DiT: sample latents per class (or per caption) with the Euler sampler, decode
// them with the frozen decoder, and lay them out as one PNG (a row per class or caption).
#pragma once

#include "../bytes.h"
#include "../result.h"
#include "models/autoencoder.h"
#include "rectified_flow.h"
#include "workload.h"

namespace tessera::common {

struct GridOptions {
    std::int64_t classes = 10;
    // A text model's rows: these captions (text and lengths; one row each), on the CPU.
    DitCondition captions;
    std::int64_t per_class = 8;
    double latent_scale = 1.0;  // the dataset's scale factor: decoder input = latents / scale
    SampleOptions sampling;
};

// (rows·cols, 1, H, W) images in [-1, 1] → one greyscale PNG, `cols` images per row, each
// pixel drawn as an `upscale` × `upscale` square.
Result<Bytes> images_to_png(const torch::Tensor& images, std::int64_t cols, std::int64_t upscale = 1);

Result<Bytes> sample_png_grid(Workload& workload, Decoder& decoder, const GridOptions& options,
                              torch::Device device = torch::kCPU);

}  // namespace tessera::common
