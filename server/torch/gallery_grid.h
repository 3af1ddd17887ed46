// A gallery's grid settings (server/torch only: LibTorch's sampling header): `classes` rows of
// kGallerySamplesPerClass images from the fixed noise, decoded after dividing by `latent_scale`.
#pragma once

#include "torch/sampling.h"
#include "torch_model.h"

namespace tessera::server {

inline common::GridOptions gallery_grid(std::int64_t classes, double latent_scale) {
    common::GridOptions grid;
    grid.classes = classes;
    grid.per_class = kGallerySamplesPerClass;
    grid.latent_scale = latent_scale;
    grid.sampling.steps = kGallerySamplingSteps;
    grid.sampling.seed = kGallerySamplingSeed;
    return grid;
}

}  // namespace tessera::server
