// The server's uses of LibTorch, behind a torch-free header: building a task's initial
// weights (version 0), its calibration unit, the model probe that evaluates weights on the
// validation shard and on a unit's own samples, and the dashboard's sample images.
#pragma once

#include <filesystem>
#include <optional>

#include "calibration.h"
#include "delta_codec.h"
#include "model_probe.h"
#include "sample_gallery.h"
#include "task_config.h"

namespace tessera::server {

// The preset's seeded initial weights, sorted by name.
common::Result<common::NamedTensors> initial_weights(const TaskConfig& config);
// Probes that evaluate on the validation shard at `validation_shard`, loaded once and shared.
common::Result<ModelProbeFactory> make_torch_probe_factory(const TaskConfig& config,
                                                           const std::filesystem::path& validation_shard);
// The task's calibration: the server trains one unit with the task's hyperparameters (at most
// 100 steps) on the validation shard from `weights`, then a second from the first one's
// weights, and keeps the first's norm per step and the lower of their gains per step.
common::Result<Calibration> calibrate(const TaskConfig& config, const common::NamedTensors& weights,
                                      const std::filesystem::path& validation_shard);
// A text model's gallery draws a row for each of the validation shard's first captions.
constexpr std::int64_t kGalleryCaptions = 8;
// A gallery's grid: images per class or caption, Euler steps, and the noise's seed (the same
// noise for every version).
constexpr std::int64_t kGallerySamplesPerClass = 8;
constexpr std::int64_t kGallerySamplingSteps = 20;
constexpr std::uint64_t kGallerySamplingSeed = 1234;

// Renderers of a class-by-class image grid through the dataset's decoder (`decoder_file`,
// latents divided by `latent_scale` first), or for a text model a caption-by-caption grid of
// the first captions of `validation_shard`; none for presets that do not generate images.
std::optional<SampleRendererFactory> make_torch_sample_renderer_factory(const TaskConfig& config,
                                                                        const std::filesystem::path& decoder_file,
                                                                        double latent_scale,
                                                                        const std::filesystem::path& validation_shard);

}  // namespace tessera::server
