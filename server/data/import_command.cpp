// Import: every shard is loaded and checked as training would load it, then stored
// zstd-compressed under a content-derived entry in dataset.json.
#include "import_command.h"

#include <torch/torch.h>

#include <cstdio>
#include <optional>

#include "dataset_manifest.h"
#include "file_io.h"
#include "sha256.h"
#include "torch/shard_data.h"
#include "zstd_codec.h"

namespace tessera::data {
namespace {

struct CheckedShard {
    common::Bytes stored;  // zstd bytes as they will be written
    std::vector<std::int64_t> sample_shape;
    std::string kind;
    std::int64_t samples = 0;
    std::int64_t max_label = 0;
    std::int64_t text_dim = 0;
};

common::Result<CheckedShard> check_shard(const std::filesystem::path& path) {
    auto bytes = common::read_file(path, common::kMaxShardBytes);
    if (!bytes) return bytes.error();
    auto shard = common::load_shard(*bytes);
    if (!shard) return common::with_context(path.string(), shard.error());
    CheckedShard checked;
    auto sizes = shard->inputs.sizes();
    checked.sample_shape = {sizes[1], sizes[2], sizes[3]};
    checked.kind = shard->pixels ? "pixels" : "latents";
    checked.samples = shard->size();
    checked.max_label = shard->labels.max().item<std::int64_t>();
    checked.text_dim = shard->text_emb.defined() ? shard->text_emb.size(2) : 0;
    if (common::is_zstd_frame(*bytes)) {
        checked.stored = std::move(bytes).value();
    } else {
        auto packed = common::zstd_compress(*bytes, 9);
        if (!packed) return packed.error();
        checked.stored = std::move(packed).value();
    }
    return checked;
}

common::Status check_compatible(const common::DatasetManifest& m, const CheckedShard& s, const std::string& what) {
    if (s.kind != m.kind || s.sample_shape != m.sample_shape || s.text_dim != m.text_dim)
        return common::make_error(what + " does not match the dataset's kind, sample shape or text_dim");
    if (s.max_label >= static_cast<std::int64_t>(m.classes.size()))
        return common::make_error(what + " has label " + std::to_string(s.max_label) + " but the dataset has " +
                                  std::to_string(m.classes.size()) + " classes");
    return {};
}

common::Result<common::DatasetFile> store(const std::filesystem::path& dir, const std::string& name,
                                          const CheckedShard& s) {
    if (auto written = common::write_file_atomic(dir / name, s.stored); !written) return written.error();
    return common::DatasetFile{name, common::sha256_hex(s.stored), static_cast<std::int64_t>(s.stored.size()),
                               s.samples};
}

// The manifest of a new dataset, from its first shard and the options; its classes are the
// labels seen (or --classes, when more).
common::Result<common::DatasetManifest> new_manifest(const ImportOptions& options,
                                                     const std::vector<CheckedShard>& shards,
                                                     const std::optional<CheckedShard>& validation) {
    if (!validation) return common::make_error("import: a new dataset needs --validation FILE");
    const auto& first = shards.front();
    common::DatasetManifest manifest;
    manifest.name = options.name;
    manifest.kind = first.kind;
    manifest.sample_shape = first.sample_shape;
    manifest.scale_factor = options.scale_factor;
    manifest.text_dim = first.text_dim;
    std::int64_t classes = options.num_classes;
    for (const auto& s : shards) classes = std::max(classes, s.max_label + 1);
    classes = std::max(classes, validation->max_label + 1);
    for (std::int64_t c = 0; c < classes; ++c) manifest.classes.push_back("class " + std::to_string(c));
    return manifest;
}
}  // namespace

common::Status import_shards(const ImportOptions& options) {
    if (options.shards.empty()) return common::make_error("import: name at least one shard file");
    std::error_code ec;
    std::filesystem::create_directories(options.out, ec);
    if (ec) return common::make_error("cannot create " + options.out.string() + ": " + ec.message());
    auto manifest_path = options.out / "dataset.json";
    bool existing = std::filesystem::exists(manifest_path);

    // Check everything before writing anything, so a bad file changes nothing.
    std::vector<CheckedShard> shards;
    for (const auto& path : options.shards) {
        auto shard = check_shard(path);
        if (!shard) return shard.error();
        shards.push_back(std::move(shard).value());
    }
    std::optional<CheckedShard> validation;
    if (!options.validation.empty()) {
        auto shard = check_shard(options.validation);
        if (!shard) return shard.error();
        validation = std::move(shard).value();
    }

    auto loaded = existing ? common::load_dataset_manifest(manifest_path) : new_manifest(options, shards, validation);
    if (!loaded) return loaded.error();
    auto manifest = std::move(loaded).value();
    for (std::size_t i = 0; i < shards.size(); ++i)
        if (auto ok = check_compatible(manifest, shards[i], options.shards[i].string()); !ok) return ok;
    if (validation)
        if (auto ok = check_compatible(manifest, *validation, options.validation.string()); !ok) return ok;

    for (const auto& s : shards) {
        auto name = "import-" + common::sha256_hex(s.stored).substr(0, 16) + ".safetensors.zst";
        bool duplicate = false;
        for (const auto& f : manifest.train) duplicate = duplicate || f.file == name;
        if (duplicate) continue;
        auto entry = store(options.out, name, s);
        if (!entry) return entry.error();
        manifest.train.push_back(std::move(entry).value());
    }
    if (validation) {
        auto entry = store(options.out, "validation.safetensors.zst", *validation);
        if (!entry) return entry.error();
        manifest.validation = std::move(entry).value();
    }
    std::fprintf(stderr, "imported %zu shards; the dataset has %zu training shards\n", shards.size(),
                 manifest.train.size());
    return common::save_dataset_manifest(manifest_path, manifest);
}

}  // namespace tessera::data
