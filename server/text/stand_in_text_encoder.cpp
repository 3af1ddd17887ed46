// The stand-in text encoder: seeded word table + sinusoidal positions + a frozen seeded
// neighbour mix, saved as safetensors
// with the vocabulary in the header's metadata so the file alone can embed a prompt.
#include "stand_in_text_encoder.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "dataset_manifest.h"
#include "file_io.h"
#include "safetensors.h"
#include "seeded_draws.h"
#include "torch/tensor_convert.h"

namespace tessera::data {
namespace {

using common::Result;

constexpr std::uint64_t kTableStream = 1;
constexpr std::uint64_t kContextLeftStream = 2;
constexpr std::uint64_t kContextRightStream = 3;
constexpr std::uint64_t kMaxFileBytes = std::uint64_t{64} << 20;
constexpr std::string_view kPunctuation = ".,;:!?\"";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// A word for an error message: printable ASCII, at most kMaxWordLength characters.
std::string printable(std::string_view word) {
    std::string out;
    for (char c : word.substr(0, kMaxWordLength)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
    if (word.size() > static_cast<std::size_t>(kMaxWordLength)) out += "...";
    return out;
}

torch::Tensor position_codes(std::int64_t rows, std::int64_t dim) {
    auto codes = torch::zeros({rows, dim}, torch::kFloat64);
    auto a = codes.accessor<double, 2>();
    for (std::int64_t p = 0; p < rows; ++p)
        for (std::int64_t k = 0; 2 * k < dim; ++k) {
            double omega = std::pow(10000.0, -2.0 * static_cast<double>(k) / static_cast<double>(dim));
            a[p][2 * k] = std::sin(static_cast<double>(p) * omega);
            if (2 * k + 1 < dim) a[p][2 * k + 1] = std::cos(static_cast<double>(p) * omega);
        }
    return codes.to(torch::kFloat32);
}

torch::Tensor seeded_normal(std::int64_t rows, std::int64_t cols, std::uint64_t seed, std::uint64_t stream,
                            double scale) {
    std::vector<float> values(static_cast<std::size_t>(rows * cols));
    SeededDraws draws(seed, stream);
    for (auto& value : values) value = static_cast<float>(draws.normal() * scale);
    return torch::from_blob(values.data(), {rows, cols}, torch::kFloat32).clone();
}

common::Status check_vocabulary(const std::vector<std::string>& vocabulary) {
    if (vocabulary.empty() || static_cast<std::int64_t>(vocabulary.size()) > kMaxVocabulary)
        return common::make_error("the vocabulary must hold 1 to " + std::to_string(kMaxVocabulary) + " words");
    std::set<std::string_view> seen;
    for (const auto& word : vocabulary) {
        bool plain = !word.empty() && word.size() <= static_cast<std::size_t>(kMaxWordLength);
        for (char c : word)
            plain = plain && c > 0x20 && c < 0x7f && !(c >= 'A' && c <= 'Z') &&
                    kPunctuation.find(c) == std::string_view::npos;
        if (!plain) return common::make_error("the vocabulary holds an unusable word \"" + printable(word) + "\"");
        if (!seen.insert(word).second) return common::make_error("the vocabulary holds \"" + word + "\" twice");
    }
    return {};
}

}  // namespace

StandInTextEncoder::StandInTextEncoder(std::vector<std::string> vocabulary, torch::Tensor word_embeddings,
                                       torch::Tensor position_codes, torch::Tensor context_left,
                                       torch::Tensor context_right)
    : vocabulary_(std::move(vocabulary)), word_embeddings_(std::move(word_embeddings)),
      position_codes_(std::move(position_codes)), context_left_(std::move(context_left)),
      context_right_(std::move(context_right)) {}

StandInTextEncoder StandInTextEncoder::create(std::vector<std::string> vocabulary, std::int64_t dim,
                                              std::uint64_t seed) {
    auto v = static_cast<std::int64_t>(vocabulary.size());
    double scale = 1.0 / std::sqrt(static_cast<double>(dim));
    return StandInTextEncoder(std::move(vocabulary), seeded_normal(v, dim, seed, kTableStream, 1.0),
                              position_codes(kMaxCaptionWords, dim),
                              seeded_normal(dim, dim, seed, kContextLeftStream, scale),
                              seeded_normal(dim, dim, seed, kContextRightStream, scale));
}

Result<common::Bytes> StandInTextEncoder::to_safetensors() const {
    std::string words;
    for (const auto& word : vocabulary_) words += (words.empty() ? "" : " ") + word;
    common::TorchTensorMap tensors = {{"word_embeddings", word_embeddings_}, {"position_codes", position_codes_}};
    if (contextual()) {
        tensors.emplace("context_left", context_left_);
        tensors.emplace("context_right", context_right_);
    }
    return common::to_safetensors(tensors, {{"format", kTextEncoderFormat}, {"vocabulary", words}});
}

Result<StandInTextEncoder> StandInTextEncoder::load(const std::filesystem::path& file) {
    auto bytes = common::read_file(file, kMaxFileBytes);
    if (!bytes) return bytes.error();
    auto encoder = parse(*bytes);
    if (!encoder) return common::with_context(file.string(), encoder.error());
    return encoder;
}

Result<StandInTextEncoder> StandInTextEncoder::parse(common::ByteView bytes) {
    try {
        auto file = common::parse_safetensors(bytes);
        if (!file) return file.error();
        const auto& metadata = file->metadata();
        auto format = metadata.find("format");
        auto words = metadata.find("vocabulary");
        if (format == metadata.end() || format->second != kTextEncoderFormat || words == metadata.end())
            return common::make_error(std::string("not a ") + kTextEncoderFormat + " file");
        std::vector<std::string> vocabulary;
        for (std::size_t begin = 0; begin < words->second.size();) {
            auto end = std::min(words->second.find(' ', begin), words->second.size());
            vocabulary.push_back(words->second.substr(begin, end - begin));
            begin = end + 1;
        }
        if (auto status = check_vocabulary(vocabulary); !status) return status.error();
        const auto* table = file->find("word_embeddings");
        const auto* positions = file->find("position_codes");
        if (table == nullptr || positions == nullptr)
            return common::make_error("a text encoder needs \"word_embeddings\" and \"position_codes\"");
        auto v = static_cast<std::int64_t>(vocabulary.size());
        if (table->dtype != common::DType::F32 || table->shape.size() != 2 || table->shape[0] != v ||
            table->shape[1] < 1 || table->shape[1] > common::kMaxTextDim)
            return common::make_error("\"word_embeddings\" must be F32 [" + std::to_string(v) + " words, D]");
        if (positions->dtype != common::DType::F32 || positions->shape.size() != 2 ||
            positions->shape[0] != kMaxCaptionWords || positions->shape[1] != table->shape[1])
            return common::make_error("\"position_codes\" must be F32 [" + std::to_string(kMaxCaptionWords) +
                                      ", D] like \"word_embeddings\"");
        auto d = table->shape[1];
        const auto* left = file->find("context_left");
        const auto* right = file->find("context_right");
        if ((left == nullptr) != (right == nullptr))
            return common::make_error("a text encoder holds both \"context_left\" and \"context_right\" or neither");
        for (const auto* context : {left, right})
            if (context != nullptr &&
                (context->dtype != common::DType::F32 || context->shape != std::vector<std::int64_t>{d, d}))
                return common::make_error("the context matrices must be F32 [D, D] with D = " + std::to_string(d));
        std::vector<torch::Tensor> weights;
        for (const auto* view : {table, positions, left, right}) {
            if (view == nullptr) {
                weights.emplace_back();
                continue;
            }
            auto tensor = common::to_torch(*view);
            if (!tensor) return tensor.error();
            if (!torch::isfinite(*tensor).all().item<bool>())
                return common::make_error("the text encoder holds non-finite weights");
            weights.push_back(std::move(tensor).value());
        }
        return StandInTextEncoder(std::move(vocabulary), weights[0], weights[1], weights[2], weights[3]);
    } catch (const c10::Error& error) {
        return common::make_error(std::string("text encoder: ") + error.what_without_backtrace());
    }
}

Result<std::vector<std::int64_t>> StandInTextEncoder::tokenize(std::string_view text) const {
    std::vector<std::int64_t> ids;
    std::size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && is_space(text[i])) ++i;
        auto begin = i;
        while (i < text.size() && !is_space(text[i])) ++i;
        auto word = text.substr(begin, i - begin);
        while (!word.empty() && kPunctuation.find(word.front()) != std::string_view::npos) word.remove_prefix(1);
        while (!word.empty() && kPunctuation.find(word.back()) != std::string_view::npos) word.remove_suffix(1);
        if (word.empty()) continue;
        std::string lower(word);
        for (auto& c : lower)
            if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        auto found = std::find(vocabulary_.begin(), vocabulary_.end(), lower);
        if (found == vocabulary_.end())
            return common::make_error("the word \"" + printable(word) +
                                      "\" is not in the text encoder's vocabulary of " +
                                      std::to_string(vocabulary_.size()) + " words");
        if (static_cast<std::int64_t>(ids.size()) == kMaxCaptionWords)
            return common::make_error("a caption holds at most " + std::to_string(kMaxCaptionWords) + " words");
        ids.push_back(found - vocabulary_.begin());
    }
    if (ids.empty()) return common::make_error("a caption needs at least one word");
    return ids;
}

torch::Tensor StandInTextEncoder::embed_ids(const std::vector<std::int64_t>& ids) const {
    auto n = static_cast<std::int64_t>(ids.size());
    auto index = torch::from_blob(const_cast<std::int64_t*>(ids.data()), {n}, torch::kInt64);
    auto x = word_embeddings_.index_select(0, index) + position_codes_.slice(0, 0, n);
    if (!contextual() || n == 1) return x;
    auto tokens = x.clone();
    tokens.slice(0, 1, n) += x.slice(0, 0, n - 1).matmul(context_left_);
    tokens.slice(0, 0, n - 1) += x.slice(0, 1, n).matmul(context_right_);
    return tokens;
}

Result<torch::Tensor> StandInTextEncoder::embed_caption(std::string_view text) const {
    auto ids = tokenize(text);
    if (!ids) return ids.error();
    return embed_ids(*ids);
}

Result<StandInTextEncoder::Packed> StandInTextEncoder::embed_captions(const std::vector<std::string>& texts) const {
    std::vector<torch::Tensor> captions;
    std::vector<std::int64_t> lengths;
    for (std::size_t i = 0; i < texts.size(); ++i) {
        auto ids = tokenize(texts[i]);
        if (!ids) return common::with_context("caption " + std::to_string(i), ids.error());
        captions.push_back(embed_ids(*ids));
        lengths.push_back(static_cast<std::int64_t>(ids->size()));
    }
    Packed packed;
    packed.tokens = captions.empty() ? torch::zeros({0, dim()}) : torch::cat(captions);
    packed.lengths = torch::tensor(lengths, torch::kInt64);
    return packed;
}

}  // namespace tessera::data
