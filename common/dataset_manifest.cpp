// dataset.json reading and writing.
#include "dataset_manifest.h"

#include <boost/json/serialize.hpp>

#include "file_io.h"
#include "json_strict.h"
#include "sha256.h"

namespace tessera::common {
namespace {

constexpr std::string_view kFormat = "tessera.dataset";
constexpr std::uint64_t kMaxManifestBytes = 16 << 20;

boost::json::value file_to_json(const DatasetFile& f) {
    return {{"file", f.file}, {"sha256", f.sha256}, {"bytes", f.bytes}, {"samples", f.samples}};
}

DatasetFile read_file_entry(const boost::json::value& json, const std::string& path, JsonObjectReader& parent) {
    JsonObjectReader reader(json, path);
    DatasetFile f;
    f.file = reader.string("file", 0, 255);
    f.sha256 = reader.string("sha256", 0, kSha256HexLength);
    f.bytes = reader.integer("bytes", 0, INT64_MAX);
    f.samples = reader.integer("samples", 0, INT64_MAX);
    if (!reader.failed() && (f.file.find('/') != std::string::npos || f.file.starts_with(".")))
        reader.fail("field \"file\": must be a plain file name inside the dataset directory");
    parent.absorb(reader.finish());
    return f;
}

}  // namespace

Status save_dataset_manifest(const std::filesystem::path& path, const DatasetManifest& m) {
    boost::json::array shape, classes, train;
    for (auto d : m.sample_shape) shape.push_back(d);
    for (const auto& c : m.classes) classes.push_back(boost::json::string(c));
    for (const auto& f : m.train) train.push_back(file_to_json(f));
    boost::json::object json{{"format", kFormat},
                             {"version", 1},
                             {"name", m.name},
                             {"kind", m.kind},
                             {"sample_shape", std::move(shape)},
                             {"scale_factor", m.scale_factor},
                             {"classes", std::move(classes)},
                             {"text_dim", m.text_dim},
                             {"train", std::move(train)},
                             {"validation", file_to_json(m.validation)},
                             {"encoder", file_to_json(m.encoder)},
                             {"decoder", file_to_json(m.decoder)},
                             {"reconstruction_mse", m.reconstruction_mse}};
    // Written only when present, so a manifest without them reads as before everywhere.
    if (!m.heldout.file.empty()) json["heldout"] = file_to_json(m.heldout);
    if (!m.text_encoder.file.empty()) json["text_encoder"] = file_to_json(m.text_encoder);
    return write_file_atomic(path, as_bytes(boost::json::serialize(json) + "\n"));
}

Result<DatasetManifest> load_dataset_manifest(const std::filesystem::path& path) {
    auto bytes = read_file(path, kMaxManifestBytes);
    if (!bytes) return bytes.error();
    auto json = parse_json_strict(as_string_view(*bytes), {.max_bytes = kMaxManifestBytes, .max_depth = 8});
    if (!json) return with_context(path.string(), json.error());
    JsonObjectReader reader(*json, "dataset");
    DatasetManifest m;
    if (reader.string("format", 0, 64) != kFormat && !reader.failed()) reader.fail("not a tessera.dataset file");
    reader.integer("version", 1, 1);
    m.name = reader.string("name", 1, 128);
    m.kind = reader.one_of("kind", {"latents", "pixels"});
    m.scale_factor = reader.number("scale_factor", 1e-9, 1e9);
    m.text_dim = reader.integer("text_dim", 0, kMaxTextDim);
    m.reconstruction_mse = reader.number("reconstruction_mse", -1, 1e9);
    if (const auto* shape = reader.field("sample_shape")) {
        const auto* array = shape->if_array();
        std::int64_t dim = 0;
        if (array == nullptr || array->size() != 3)
            reader.fail("sample_shape must be [C, H, W]");
        else
            for (const auto& d : *array)
                if (json_to_integer(d, 1, kMaxSampleDim, dim))
                    m.sample_shape.push_back(dim);
                else
                    reader.fail("sample_shape holds a non-positive or non-integer dimension");
    }
    if (const auto* classes = reader.field("classes")) {
        const auto* array = classes->if_array();
        if (array == nullptr || array->empty() || array->size() > static_cast<std::size_t>(kMaxClasses))
            reader.fail("classes must be a non-empty array");
        else
            for (const auto& c : *array)
                if (c.is_string())
                    m.classes.emplace_back(c.get_string());
                else
                    reader.fail("classes must hold strings");
    }
    if (const auto* train = reader.field("train")) {
        const auto* array = train->if_array();
        if (array == nullptr || array->empty())
            reader.fail("train must be a non-empty array of shards");
        else
            for (std::size_t i = 0; i < array->size(); ++i)
                m.train.push_back(read_file_entry((*array)[i], "dataset.train[" + std::to_string(i) + "]", reader));
    }
    for (auto [key, target] :
         {std::pair{"validation", &m.validation}, {"encoder", &m.encoder}, {"decoder", &m.decoder}})
        if (const auto* entry = reader.field(key)) *target = read_file_entry(*entry, reader.path_of(key), reader);
    for (auto [key, target] : {std::pair{"heldout", &m.heldout}, {"text_encoder", &m.text_encoder}})
        if (reader.has(key))
            if (const auto* entry = reader.field(key)) *target = read_file_entry(*entry, reader.path_of(key), reader);
    if (auto status = reader.finish(); !status) return with_context(path.string(), status.error());
    return m;
}

Status verify_dataset_files(const std::filesystem::path& dir, const DatasetManifest& m) {
    std::vector<const DatasetFile*> files{&m.validation};
    for (const auto& f : m.train) files.push_back(&f);
    if (!m.encoder.file.empty()) files.push_back(&m.encoder);
    if (!m.decoder.file.empty()) files.push_back(&m.decoder);
    if (!m.heldout.file.empty()) files.push_back(&m.heldout);
    if (!m.text_encoder.file.empty()) files.push_back(&m.text_encoder);
    for (const auto* f : files) {
        auto path = dir / f->file;
        std::error_code ec;
        auto size = std::filesystem::file_size(path, ec);
        if (ec) return make_error(path.string() + " is missing");
        if (static_cast<std::int64_t>(size) != f->bytes)
            return make_error(path.string() + " has " + std::to_string(size) + " bytes, dataset.json says " +
                              std::to_string(f->bytes));
        auto hash = sha256_file_hex(path);
        if (!hash) return hash.error();
        if (*hash != f->sha256) return make_error(path.string() + " does not match its SHA-256 in dataset.json");
    }
    return {};
}

}  // namespace tessera::common
