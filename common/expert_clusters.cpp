// clusters.json reading and writing.
#include "expert_clusters.h"

#include <boost/json/serialize.hpp>

#include "file_io.h"
#include "json_strict.h"

namespace tessera::common {
namespace {

constexpr std::string_view kFormat = "tessera.clusters";
constexpr std::uint64_t kMaxClustersBytes = 64 << 20;

bool plain_name(const std::string& name) {
    return !name.empty() && name.find('/') == std::string::npos && !name.starts_with(".");
}

void read_centres(JsonObjectReader& reader, ClusterManifest& m) {
    if (const auto* field = reader.field("centres")) {
        const auto* array = field->if_array();
        if (array == nullptr || static_cast<std::int64_t>(array->size()) != m.experts)
            reader.fail("centres must hold one centre per expert");
        else
            for (const auto& centre : *array) {
                const auto* values = centre.if_array();
                if (values == nullptr || static_cast<std::int64_t>(values->size()) != m.feature_dim) {
                    reader.fail("each centre must hold feature_dim numbers");
                    break;
                }
                m.centres.emplace_back();
                for (const auto& v : *values)
                    if (v.is_number())
                        m.centres.back().push_back(v.to_number<double>());
                    else
                        reader.fail("centres hold a non-number");
            }
    }
}

void read_expert_dirs(JsonObjectReader& reader, ClusterManifest& m) {
    if (const auto* field = reader.field("expert_dirs")) {
        const auto* array = field->if_array();
        if (array == nullptr || static_cast<std::int64_t>(array->size()) != m.experts)
            reader.fail("expert_dirs must name one directory per expert");
        else
            for (const auto& d : *array)
                if (d.is_string() && plain_name(std::string(d.get_string())))
                    m.expert_dirs.emplace_back(d.get_string());
                else
                    reader.fail("expert_dirs must hold plain directory names");
    }
}

void read_class_counts(JsonObjectReader& reader, ClusterManifest& m) {
    if (!reader.has("class_counts")) return;
    const auto* array = reader.field("class_counts")->if_array();
    if (array == nullptr || static_cast<std::int64_t>(array->size()) != m.experts)
        return reader.fail("class_counts must hold one row per expert");
    for (const auto& row : *array) {
        const auto* counts = row.if_array();
        bool ragged = !m.class_counts.empty() && counts != nullptr && counts->size() != m.class_counts[0].size();
        if (counts == nullptr || counts->empty() || ragged)
            return reader.fail("class_counts rows must hold one count per class, the same classes in each");
        auto& out = m.class_counts.emplace_back();
        std::int64_t n = 0;
        for (const auto& v : *counts)
            if (json_to_integer(v, 0, INT64_MAX, n))
                out.push_back(n);
            else
                return reader.fail("class_counts holds a negative or non-integer count");
    }
}

}  // namespace

Status save_cluster_manifest(const std::filesystem::path& path, const ClusterManifest& m) {
    boost::json::array sizes, validation_sizes, centres, dirs;
    for (auto n : m.sizes) sizes.push_back(n);
    for (auto n : m.validation_sizes) validation_sizes.push_back(n);
    for (const auto& centre : m.centres) {
        boost::json::array values;
        for (double v : centre) values.push_back(v);
        centres.push_back(std::move(values));
    }
    for (const auto& d : m.expert_dirs) dirs.push_back(boost::json::string(d));
    boost::json::array class_counts;
    for (const auto& row : m.class_counts) class_counts.push_back(boost::json::array(row.begin(), row.end()));
    boost::json::object json{{"format", kFormat},
                             {"version", 1},
                             {"source", m.source},
                             {"source_sha256", m.source_sha256},
                             {"experts", m.experts},
                             {"seed", m.seed},
                             {"features", m.features},
                             {"feature_dim", m.feature_dim},
                             {"iterations", m.iterations},
                             {"converged", m.converged},
                             {"inertia", m.inertia},
                             {"sizes", std::move(sizes)},
                             {"validation_sizes", std::move(validation_sizes)},
                             {"centres", std::move(centres)},
                             {"expert_dirs", std::move(dirs)},
                             {"router_dir", m.router_dir}};
    if (!m.class_counts.empty()) json["class_counts"] = std::move(class_counts);
    return write_file_atomic(path, as_bytes(boost::json::serialize(json) + "\n"));
}

Result<ClusterManifest> load_cluster_manifest(const std::filesystem::path& path) {
    auto bytes = read_file(path, kMaxClustersBytes);
    if (!bytes) return bytes.error();
    auto json = parse_json_strict(as_string_view(*bytes), {.max_bytes = kMaxClustersBytes, .max_depth = 8});
    if (!json) return with_context(path.string(), json.error());
    JsonObjectReader reader(*json, "clusters");
    ClusterManifest m;
    if (reader.string("format", 0, 64) != kFormat && !reader.failed()) reader.fail("not a tessera.clusters file");
    reader.integer("version", 1, 1);
    m.source = reader.string("source", 1, 128);
    m.source_sha256 = reader.string("source_sha256", 0, 64);
    m.experts = reader.integer("experts", 1, kMaxExperts);
    m.seed = static_cast<std::uint64_t>(reader.integer("seed", 0, INT64_MAX));
    m.features = reader.string("features", 1, 255);
    m.feature_dim = reader.integer("feature_dim", 1, INT64_MAX);
    m.iterations = reader.integer("iterations", 0, INT64_MAX);
    m.converged = reader.boolean("converged");
    m.inertia = reader.number("inertia", 0, 1e300);
    m.router_dir = reader.string("router_dir", 1, 255);
    auto integers = [&](const char* key, std::vector<std::int64_t>& out) {
        const auto* field = reader.field(key);
        const auto* array = field ? field->if_array() : nullptr;
        std::int64_t n = 0;
        if (array == nullptr || static_cast<std::int64_t>(array->size()) != m.experts)
            return reader.fail(std::string(key) + " must hold one count per expert");
        for (const auto& v : *array)
            if (json_to_integer(v, 0, INT64_MAX, n))
                out.push_back(n);
            else
                reader.fail(std::string(key) + " holds a negative or non-integer count");
    };
    integers("sizes", m.sizes);
    integers("validation_sizes", m.validation_sizes);
    read_centres(reader, m);
    read_expert_dirs(reader, m);
    read_class_counts(reader, m);
    if (!reader.failed() && !plain_name(m.router_dir)) reader.fail("router_dir must be a plain directory name");
    if (auto status = reader.finish(); !status) return with_context(path.string(), status.error());
    return m;
}

}  // namespace tessera::common
