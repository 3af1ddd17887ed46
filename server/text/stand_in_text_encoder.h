// The frozen stand-in text encoder of `prepare canvases`: the place of T5 or CLIP, with their
// shapes ([tokens, D] per caption, only the caption's own tokens), for a fixed vocabulary.
// A caption's words are looked up in a seeded random embedding table and a fixed sinusoidal
// position code is added, so word order changes the embedding ("a bag left of a coat" is not
// "a coat left of a bag"); then each token takes in its neighbours through two seeded random
// matrices (a frozen one-layer convolution), so that, as with T5, a token knows its context:
// the noun before "above" is not the noun before "below". The weights travel with the dataset (text_encoder.safetensors) so
// that an operator's typed prompt is embedded exactly as the training captions were:
// tessera-data embeds the captions with it, tessera-server the dashboard's prompts
// (docs/dashboard.md, "Prompts"). Format in docs/dataset_format.md, "prepare canvases".
#pragma once

#include <torch/types.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "bytes.h"
#include "result.h"

namespace tessera::data {

constexpr const char* kTextEncoderFile = "text_encoder.safetensors";
constexpr const char* kTextEncoderFormat = "tessera.stand-in-text-encoder";
constexpr std::int64_t kStandInTextDim = 64;
constexpr std::int64_t kMaxCaptionWords = 32;  // the position code's rows; longer prompts are refused
constexpr std::int64_t kMaxVocabulary = 4096;
constexpr std::int64_t kMaxWordLength = 32;

// Immutable once made: every method is const and safe to call from several threads.
class StandInTextEncoder {
public:
    // Embedding table: entry (v, d) is normal draw v·D + d of SeededDraws(seed, 1); position
    // code: row p, column 2k is sin(p·ω_k) and 2k + 1 is cos(p·ω_k), ω_k = 10000^(−2k/D);
    // context matrices: entry (i, j) is normal draw i·D + j of SeededDraws(seed, 2) (left) and
    // SeededDraws(seed, 3) (right), divided by √D.
    static StandInTextEncoder create(std::vector<std::string> vocabulary, std::int64_t dim, std::uint64_t seed);

    // A file written by to_safetensors(); its shapes, values and vocabulary are checked.
    static common::Result<StandInTextEncoder> load(const std::filesystem::path& file);
    static common::Result<StandInTextEncoder> parse(common::ByteView bytes);
    common::Result<common::Bytes> to_safetensors() const;

    // Word ids of `text`: ASCII letters lowercased, words separated by white space,
    // punctuation around a word (.,;:!?") ignored. Refuses an empty text, a caption of more than
    // kMaxCaptionWords words and any word outside the vocabulary, naming it.
    common::Result<std::vector<std::int64_t>> tokenize(std::string_view text) const;

    // f32 [words, D]: with x_i = table[word i] + position code i, row i is
    // x_i + x_{i−1}·left + x_{i+1}·right (a missing neighbour counts as zero). A file written
    // before the context matrices (2026-12-04) has none: row i is x_i.
    common::Result<torch::Tensor> embed_caption(std::string_view text) const;

    // Many captions packed back to back, as shards store them: tokens f32 [T, D] and the
    // number of each caption's tokens, I64 [N].
    struct Packed {
        torch::Tensor tokens;
        torch::Tensor lengths;
    };
    common::Result<Packed> embed_captions(const std::vector<std::string>& texts) const;

    std::int64_t dim() const { return word_embeddings_.size(1); }
    bool contextual() const { return context_left_.defined(); }
    const std::vector<std::string>& vocabulary() const { return vocabulary_; }

private:
    StandInTextEncoder(std::vector<std::string> vocabulary, torch::Tensor word_embeddings, torch::Tensor position_codes,
                       torch::Tensor context_left, torch::Tensor context_right);
    torch::Tensor embed_ids(const std::vector<std::int64_t>& ids) const;

    std::vector<std::string> vocabulary_;
    torch::Tensor word_embeddings_;  // f32 [V, D]
    torch::Tensor position_codes_;   // f32 [kMaxCaptionWords, D]
    torch::Tensor context_left_;     // f32 [D, D], or undefined in a file from before them
    torch::Tensor context_right_;    // f32 [D, D], likewise
};

}  // namespace tessera::data
