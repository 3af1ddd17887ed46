// Sample grids.
#include "sampling.h"

#include <torch/torch.h>

#include "../png.h"

namespace tessera::common {

Result<Bytes> images_to_png(const torch::Tensor& source, std::int64_t cols, std::int64_t upscale) {
    auto images = source.repeat_interleave(upscale, 2).repeat_interleave(upscale, 3);
    auto n = images.size(0), h = images.size(2), w = images.size(3);
    auto rows = (n + cols - 1) / cols;
    auto pixels =
        ((images.detach().to(torch::kCPU, torch::kFloat32).clamp(-1, 1) + 1) * 127.5).round().to(torch::kUInt8);
    auto grid = torch::zeros({rows * h, cols * w}, torch::kUInt8);
    for (std::int64_t i = 0; i < n; ++i)
        grid.slice(0, (i / cols) * h, (i / cols + 1) * h)
            .slice(1, (i % cols) * w, (i % cols + 1) * w)
            .copy_(pixels[i][0]);
    grid = grid.contiguous();
    return encode_png_gray(static_cast<std::uint32_t>(cols * w), static_cast<std::uint32_t>(rows * h),
                           ByteView(grid.data_ptr<std::uint8_t>(), static_cast<std::size_t>(grid.numel())));
}

Result<Bytes> sample_png_grid(Workload& workload, Decoder& decoder, const GridOptions& options, torch::Device device) {
    auto* dit = dit_of(workload);
    if (dit == nullptr) return make_error("model preset " + workload.preset().name + " cannot generate images");
    try {
        torch::NoGradGuard no_grad;
        (*dit)->to(device);
        (*dit)->eval();
        decoder->to(device);
        decoder->eval();
        DitCondition condition;
        if ((*dit)->takes_text()) {
            if (!options.captions.text.defined()) return make_error("a text model samples for captions; none given");
            auto rows = [&](const torch::Tensor& t) {
                return t.defined() ? t.repeat_interleave(options.per_class, 0).to(device) : t;
            };
            condition = {{}, rows(options.captions.text), rows(options.captions.text_len)};
        } else {
            condition.labels =
                torch::arange(options.classes, torch::kInt64).repeat_interleave(options.per_class).to(device);
        }
        auto latents = euler_sample(*dit, condition, options.sampling);
        auto images = decoder->forward(latents / options.latent_scale);
        (*dit)->train();
        return images_to_png(images, options.per_class);
    } catch (const c10::Error& error) {
        return make_error(std::string("sampling failed: ") + error.what_without_backtrace());
    }
}

}  // namespace tessera::common
