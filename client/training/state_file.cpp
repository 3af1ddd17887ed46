// Reading a volunteer's state file (state_file.h).
#include "state_file.h"

#include "file_io.h"

namespace tessera::client {

common::Result<std::optional<common::NamedTensorFile>> read_state_file(const std::filesystem::path& file,
                                                                       std::string_view format,
                                                                       std::uint64_t max_bytes,
                                                                       std::string_view what) {
    std::error_code missing;
    if (!std::filesystem::exists(file, missing)) return std::optional<common::NamedTensorFile>();
    auto bytes = common::read_file(file, max_bytes);
    if (!bytes) return bytes.error();
    auto read = common::read_named_tensors(*bytes);
    if (!read) return common::with_context(file.string(), read.error());
    if (metadata_field(read->metadata, "format") != format)
        return common::make_error(file.string() + ": not " + std::string(what));
    return std::optional<common::NamedTensorFile>(std::move(*read));
}

std::string metadata_field(const common::TensorMetadata& metadata, const std::string& key) {
    auto found = metadata.find(key);
    return found == metadata.end() ? std::string() : found->second;
}

}  // namespace tessera::client
