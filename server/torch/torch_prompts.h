// The dashboard's prompts for a text task, drawn with LibTorch behind a torch-free header: the
// captions a prompt may pick (the first of the validation and held-out shards, with their
// cached embeddings), typed prompts embedded by the dataset's stand-in text encoder
// (server/text) where it ships one, and the renderer that draws a row of samples for either
// through the dataset's decoder (docs/dashboard.md, "Prompts").
#pragma once

#include <optional>

#include "dataset_manifest.h"
#include "sample_gallery.h"
#include "task_config.h"

namespace tessera::server {

// The captions of each split a prompt may pick.
constexpr std::int64_t kPromptCaptionsPerSplit = 16;

struct TorchPrompts {
    std::shared_ptr<const PromptBook> book;
    PromptRendererFactory renderer;  // builds the model and loads the decoder on first use
};

// A text task's prompts; nullopt for a class task or a dataset without a decoder. An error
// names the file that could not be read (a shard's captions, the text encoder).
common::Result<std::optional<TorchPrompts>> make_torch_prompts(const TaskConfig& config,
                                                               const common::DatasetManifest& manifest);

}  // namespace tessera::server
