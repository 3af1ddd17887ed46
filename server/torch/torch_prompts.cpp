// Prompts on the dashboard: the captions a prompt may pick, typed prompts through the stand-in
// text encoder, and the renderer of a prompt's row of samples.
#include "torch_prompts.h"

#include <torch/torch.h>

#include "caption_text.h"
#include "file_io.h"
#include "stand_in_text_encoder.h"
#include "torch/model_state.h"
#include "torch/sampling.h"
#include "torch/shard_data.h"
#include "torch/tensor_convert.h"
#include "task_shape.h"
#include "torch/workload.h"

namespace tessera::server {
namespace {

constexpr std::int64_t kPromptSamplingSteps = 20;  // as the gallery's

// One caption a prompt may pick: its own tokens, f32 (1, L, D), and its length (1,).
struct CachedCaption {
    torch::Tensor text;
    torch::Tensor len;
};

class TorchPromptBook : public PromptBook {
public:
    TorchPromptBook(std::vector<PromptCaption> captions, std::vector<CachedCaption> embeddings,
                    std::optional<data::StandInTextEncoder> encoder)
        : captions_(std::move(captions)), embeddings_(std::move(embeddings)), encoder_(std::move(encoder)) {
        if (encoder_) vocabulary_ = encoder_->vocabulary();
    }

    const std::vector<PromptCaption>& captions() const override { return captions_; }
    const std::vector<std::string>& vocabulary() const override { return vocabulary_; }

    common::Result<std::string> key_of(const PromptRequest& request) const override {
        if (request.caption >= 0) {
            if (request.caption >= static_cast<std::int64_t>(captions_.size()))
                return common::make_error("there is no caption " + std::to_string(request.caption) +
                                          ": the task lists " + std::to_string(captions_.size()) +
                                          " (GET .../prompts)");
            return "caption:" + std::to_string(request.caption);
        }
        if (!encoder_)
            return common::make_error(
                "this dataset ships no stand-in text encoder: its captions were embedded outside Tessera (T5 or "
                "CLIP, which cannot run in the server), so only its own captions can be drawn");
        auto ids = encoder_->tokenize(request.text);
        if (!ids) return ids.error();
        std::string words;
        for (auto id : *ids) words += (words.empty() ? "" : " ") + vocabulary_[static_cast<std::size_t>(id)];
        return "text:" + words;
    }

    // The caption the request names, as the model takes it: one row.
    common::Result<common::DitCondition> condition(const PromptRequest& request) const {
        if (auto key = key_of(request); !key) return key.error();
        if (request.caption >= 0) {
            const auto& cached = embeddings_[static_cast<std::size_t>(request.caption)];
            return common::DitCondition{{}, cached.text, cached.len};
        }
        auto tokens = encoder_->embed_caption(request.text);
        if (!tokens) return tokens.error();
        return common::DitCondition{{}, tokens->unsqueeze(0), torch::tensor({tokens->size(0)}, torch::kInt64)};
    }

private:
    std::vector<PromptCaption> captions_;
    std::vector<CachedCaption> embeddings_;  // one per caption
    std::optional<data::StandInTextEncoder> encoder_;
    std::vector<std::string> vocabulary_;
};

// The first captions of a shard: their texts (or numbered labels) and their own tokens.
common::Status add_captions(const std::filesystem::path& shard, const std::string& split, std::int64_t text_dim,
                            std::vector<PromptCaption>& captions, std::vector<CachedCaption>& embeddings) {
    auto data = common::load_shard_file(shard);
    if (!data) return common::with_context(split + " shard", data.error());
    if (!data->has_captions() || data->text_dim() != text_dim)
        return common::make_error("the " + split + " shard holds no captions " + std::to_string(text_dim) + " wide");
    auto rows = std::min<std::int64_t>(kPromptCaptionsPerSplit, data->size());
    auto bytes = common::read_file(shard, common::kMaxCaptionShardBytes);
    if (!bytes) return common::with_context(split + " shard", bytes.error());
    auto texts = common::read_caption_texts(*bytes, static_cast<std::size_t>(rows));
    if (!texts) return common::with_context(split + " captions", texts.error());
    auto padded = data->slice(0, rows).padded_captions();
    for (std::int64_t i = 0; i < rows; ++i) {
        auto len = padded.len[i].item<std::int64_t>();
        embeddings.push_back({padded.text.slice(0, i, i + 1).slice(1, 0, len).to(torch::kFloat32).clone(),
                              torch::tensor({len}, torch::kInt64)});
        auto label = static_cast<std::size_t>(i) < texts->size() ? (*texts)[static_cast<std::size_t>(i)]
                                                                 : split + " caption " + std::to_string(i + 1);
        captions.push_back({label, split});
    }
    return {};
}

class TorchPromptRenderer : public PromptRenderer {
public:
    TorchPromptRenderer(std::unique_ptr<common::Workload> workload, common::Decoder decoder, double latent_scale,
                        std::shared_ptr<const TorchPromptBook> book)
        : workload_(std::move(workload)), decoder_(std::move(decoder)), latent_scale_(latent_scale),
          book_(std::move(book)) {}

    common::Result<common::Bytes> render(const common::NamedTensors& weights, const PromptRequest& request) override {
        try {
            torch::NoGradGuard no_grad;
            auto condition = book_->condition(request);
            if (!condition) return condition.error();
            if (auto status = common::load_state(*workload_->module(), common::from_named_f32(weights)); !status)
                return status.error();
            common::GridOptions grid;
            grid.captions = std::move(*condition);
            grid.per_class = kPromptSamples;
            grid.latent_scale = latent_scale_;
            grid.sampling.steps = kPromptSamplingSteps;
            grid.sampling.guidance = request.guidance;
            grid.sampling.seed = request.seed;
            return common::sample_png_grid(*workload_, decoder_, grid);
        } catch (const c10::Error& error) {
            return common::make_error(std::string("sampling the prompt: ") + error.what_without_backtrace());
        }
    }

private:
    std::unique_ptr<common::Workload> workload_;
    common::Decoder decoder_;
    double latent_scale_;
    std::shared_ptr<const TorchPromptBook> book_;
};

}  // namespace

common::Result<std::optional<TorchPrompts>> make_torch_prompts(const TaskConfig& config,
                                                               const common::DatasetManifest& manifest) {
    auto preset = common::find_preset(config.model);
    if (config.text_dim <= 0 || !preset || preset->kind != common::ModelKind::Dit || manifest.decoder.file.empty())
        return std::optional<TorchPrompts>();
    std::filesystem::path dir = config.data_dir;
    try {
        std::vector<PromptCaption> captions;
        std::vector<CachedCaption> embeddings;
        if (auto added =
                add_captions(dir / manifest.validation.file, "validation", config.text_dim, captions, embeddings);
            !added)
            return added.error();
        if (!manifest.heldout.file.empty())
            if (auto added =
                    add_captions(dir / manifest.heldout.file, "heldout", config.text_dim, captions, embeddings);
                !added)
                return added.error();
        std::optional<data::StandInTextEncoder> encoder;
        if (!manifest.text_encoder.file.empty()) {
            auto loaded = data::StandInTextEncoder::load(dir / manifest.text_encoder.file);
            if (!loaded) return loaded.error();
            if (loaded->dim() != config.text_dim)
                return common::make_error("the text encoder embeds " + std::to_string(loaded->dim()) +
                                          " wide, the task's captions are " + std::to_string(config.text_dim));
            encoder = std::move(*loaded);
        }
        auto book =
            std::make_shared<const TorchPromptBook>(std::move(captions), std::move(embeddings), std::move(encoder));
        auto decoder_file = dir / manifest.decoder.file;
        auto latent_scale = manifest.scale_factor;
        PromptRendererFactory renderer = [config, book, decoder_file,
                                          latent_scale]() -> common::Result<std::unique_ptr<PromptRenderer>> {
            try {
                common::Decoder decoder;
                if (auto status = common::load_state_file(*decoder, decoder_file); !status)
                    return common::with_context("decoder", status.error());
                auto workload = common::make_workload(config.model, shape_of(config), 0);
                if (!workload) return workload.error();
                return std::unique_ptr<PromptRenderer>(std::make_unique<TorchPromptRenderer>(
                    std::move(*workload), std::move(decoder), latent_scale, book));
            } catch (const c10::Error& error) {
                return common::make_error(std::string("building the prompt sampler: ") +
                                          error.what_without_backtrace());
            }
        };
        return std::optional<TorchPrompts>(TorchPrompts{book, std::move(renderer)});
    } catch (const c10::Error& error) {
        return common::make_error(std::string("the prompts' captions: ") + error.what_without_backtrace());
    }
}

}  // namespace tessera::server
