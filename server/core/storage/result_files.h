// The stored deltas of returned results (`results/<assignment id>.delta`): written when an
// upload is acknowledged, read (decoded and bounded) by the validator and the aggregator,
// removed once merged or refused. Thread-safe (files are written once, atomically).
#pragma once

#include <cstdint>
#include <string>

#include "delta_codec.h"
#include "file_system.h"
#include "state_dir.h"

namespace tessera::server {

class ResultFiles {
public:
    explicit ResultFiles(StateDir state, FileSystem& files = posix_file_system())
        : state_(std::move(state)), files_(files) {}

    common::Status write(const std::string& assignment_id, common::ByteView delta);
    // The same for a delta already on disk in the results directory (an upload's spool file),
    // moved into place.
    common::Status adopt(const std::string& assignment_id, const std::filesystem::path& spooled);
    // The stored file; an error here is the server's (the disk), not the volunteer's.
    common::Result<common::Bytes> read_bytes(const std::string& assignment_id) const;
    // The delta, with at most `max_values` values over all tensors (read_bytes, then decode).
    common::Result<common::NamedTensors> read(const std::string& assignment_id, std::int64_t max_values) const;
    // The same, with what the decoder knows of the file (its encoding, its quantisation steps).
    common::Result<common::DecodedDelta> read_decoded(const std::string& assignment_id, std::int64_t max_values) const;
    // Best effort: a file left behind is removed at the next start (remove_orphan_files).
    void remove(const std::string& assignment_id);

private:
    StateDir state_;
    FileSystem& files_;
};

}  // namespace tessera::server
