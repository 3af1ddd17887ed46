// Import: every shard (safetensors, plain or zstd, or a webdataset tar) is loaded and checked
// as training would load it, its captions rewritten in the packed layout, then stored
// zstd-compressed under a content-derived entry in dataset.json.
#include "import_command.h"

#include <torch/torch.h>

#include <cstdio>
#include <optional>

#include "caption_packing.h"
#include "caption_tensors.h"
#include "caption_text.h"
#include "dataset_manifest.h"
#include "file_io.h"
#include "safetensors.h"
#include "sha256.h"
#include "torch/shard_data.h"
#include "webdataset.h"
#include "zstd_codec.h"

namespace tessera::data {
namespace {

constexpr int kStoredZstdLevel = 9;

struct CheckedShard {
    common::Bytes stored;  // zstd bytes as they will be written
    std::vector<std::int64_t> sample_shape;
    std::string kind;
    std::int64_t samples = 0;
    std::int64_t max_label = 0;
    std::int64_t text_dim = 0;
};

bool is_tar(const std::filesystem::path& path) { return path.extension() == ".tar"; }

bool is_compressed_tar(const std::filesystem::path& path) {
    auto name = path.filename().string();
    for (const char* suffix : {".tar.gz", ".tgz", ".tar.zst", ".tar.xz", ".tar.bz2"})
        if (name.ends_with(suffix)) return true;
    return false;
}

std::uint64_t caption_bytes(common::ByteView raw) {
    std::uint64_t total = 0;
    if (auto file = common::parse_safetensors(raw))
        for (const auto& t : file->tensors())
            if (is_caption_tensor(t.name)) total += t.data.size();
    return total;
}

// Caption texts, when a shard has them, are one row per sample (read_caption_texts checked the rest).
common::Status check_caption_rows(common::ByteView raw, std::int64_t samples) {
    auto file = common::parse_safetensors(raw);
    if (!file) return file.error();
    const auto* captions = file->find("captions");
    if (captions != nullptr && captions->shape[0] != samples)
        return common::make_error("shard \"captions\" has " + std::to_string(captions->shape[0]) + " rows for " +
                                  std::to_string(samples) + " samples");
    return {};
}

// The shard's bytes, uncompressed: read from a tar through webdataset_to_shard, or
// decompressed (`bytes` is moved from when it is the shard itself). `source_zstd` says the
// file was already a zstd frame.
common::Result<common::Bytes> raw_shard(const std::filesystem::path& path, common::Bytes& bytes, bool& source_zstd) {
    source_zstd = false;
    if (is_compressed_tar(path))
        return common::make_error(path.string() + ": decompress the tar first (only plain .tar files are read)");
    if (is_tar(path)) {
        auto converted = webdataset_to_shard(bytes);
        if (!converted) return common::with_context(path.string(), converted.error());
        if (converted->skipped_files > 0) {
            std::string kinds;
            for (const auto& e : converted->skipped_extensions) kinds += (kinds.empty() ? "" : ", ") + e;
            std::fprintf(stderr, "%s: skipped %zu files of other kinds (%s)\n", path.c_str(), converted->skipped_files,
                         kinds.c_str());
        }
        return std::move(converted->safetensors);
    }
    if (!common::is_zstd_frame(bytes)) return std::move(bytes);
    source_zstd = true;
    auto raw = common::zstd_decompress(bytes, common::kMaxShardBytes);
    if (!raw) return common::with_context(path.string(), raw.error());
    return raw;
}

common::Result<CheckedShard> check_shard(const std::filesystem::path& path) {
    auto bytes = common::read_file(path, common::kMaxShardBytes);
    if (!bytes) return bytes.error();
    auto file_bytes = bytes->size();
    bool source_zstd = false;
    auto raw = raw_shard(path, *bytes, source_zstd);
    if (!raw) return raw.error();
    auto shard = common::load_shard(*raw);
    if (!shard) return common::with_context(path.string(), shard.error());
    auto n = shard->size();
    if (auto texts = common::read_caption_texts(*raw, static_cast<std::size_t>(n)); !texts)
        return common::with_context(path.string(), texts.error());
    if (auto ok = check_caption_rows(*raw, n); !ok) return common::with_context(path.string(), ok.error());
    CheckedShard checked;
    auto sizes = shard->inputs.sizes();
    checked.sample_shape = {sizes[1], sizes[2], sizes[3]};
    checked.kind = shard->pixels ? "pixels" : "latents";
    checked.samples = n;
    checked.max_label = shard->labels.max().item<std::int64_t>();
    checked.text_dim = shard->text_dim();

    auto before_bytes = raw->size();
    auto before_captions = caption_bytes(*raw);
    bool captions = shard->has_captions();
    if (captions) {
        auto packed = pack_captions(*raw, *shard);
        if (!packed) return common::with_context(path.string(), packed.error());
        shard->inputs.reset();  // the f32 copies are not needed any more; the check below makes its own
        shard->text_tokens.reset();
        // What is stored must load as training loads it, with the same captions' lengths.
        auto again = common::load_shard(*packed);
        if (!again) return common::with_context(path.string() + ": the packed shard does not load back", again.error());
        if (again->size() != n || !torch::equal(again->text_len, shard->text_len))
            return common::make_error(path.string() + ": the packed shard's captions differ (a bug; please report)");
        raw = std::move(packed).value();
    }
    if (!captions && source_zstd) {
        checked.stored = std::move(bytes).value();
    } else {
        auto stored = common::zstd_compress(*raw, kStoredZstdLevel);
        if (!stored) return stored.error();
        checked.stored = std::move(stored).value();
    }
    auto per = [n](std::uint64_t total) {
        return static_cast<unsigned long long>(total / static_cast<std::uint64_t>(n));
    };
    if (is_tar(path))
        std::fprintf(stderr,
                     "%s: %lld samples; %llu bytes per sample in the tar, %llu in the shard (captions %llu), "
                     "%llu stored (zstd)\n",
                     path.c_str(), static_cast<long long>(n), per(file_bytes), per(raw->size()),
                     per(caption_bytes(*raw)), per(checked.stored.size()));
    else
        std::fprintf(stderr,
                     "%s: %lld samples; %llu bytes per sample before (captions %llu), %llu after (captions %llu), "
                     "%llu stored (zstd)\n",
                     path.c_str(), static_cast<long long>(n), per(before_bytes), per(before_captions), per(raw->size()),
                     per(caption_bytes(*raw)), per(checked.stored.size()));
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
