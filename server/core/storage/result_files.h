// The stored deltas of returned results (`results/<assignment id>.delta`): written when an
// upload is acknowledged, read (decoded and bounded) by the validator and the aggregator,
// removed once merged or refused; beside one, the moments its unit started from when a replay
// audit asked for them (`<assignment id>.moments`). A delta the checks decoded is kept in memory for the replica
// comparisons and the merge in this process (up to kKeptBytes of floats, the oldest dropped
// first), so that it is decoded once.
// Thread-safe (files are written once, atomically).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "delta_codec.h"
#include "file_system.h"
#include "state_dir.h"

namespace tessera::server {

// How many result deltas this process has decoded (ResultFiles::decode), for the benchmarks.
std::uint64_t result_deltas_decoded();

class ResultFiles {
public:
    static constexpr std::uint64_t kKeptBytes = std::uint64_t{256} << 20;
    explicit ResultFiles(StateDir state, FileSystem& files = posix_file_system(), std::uint64_t kept_bytes = kKeptBytes)
        : state_(std::move(state)), files_(files), kept_bytes_(kept_bytes) {}

    common::Status write(const std::string& assignment_id, common::ByteView delta);
    // The same for a delta already on disk in the results directory (an upload's spool file),
    // moved into place.
    common::Status adopt(const std::string& assignment_id, const std::filesystem::path& spooled);
    // The stored file; an error here is the server's (the disk), not the volunteer's.
    common::Result<common::Bytes> read_bytes(const std::string& assignment_id) const;
    // The delta, with at most `max_values` values over all tensors: the kept decoded form, taken
    // (it is kept for one read), else read_bytes and decode.
    common::Result<common::NamedTensors> read(const std::string& assignment_id, std::int64_t max_values) const;
    // Keeps a delta decoded from this result's file for the next read (none when it alone
    // exceeds the bound).
    void keep_decoded(const std::string& assignment_id, common::DecodedDelta decoded) const;
    // The delta with what the decoder knows of the file (its encoding, its quantisation steps):
    // a copy of the kept form, which stays for read(), else read_bytes and decode.
    common::Result<common::DecodedDelta> read_decoded(const std::string& assignment_id, std::int64_t max_values) const;
    // Decodes a result's bytes (read_bytes), with at most `max_values` values; counted.
    static common::Result<common::DecodedDelta> decode(common::ByteView bytes, std::int64_t max_values);
    // The moments sent for a result's audit, moved into place from their upload's spool file.
    common::Status adopt_moments(const std::string& assignment_id, const std::filesystem::path& spooled);
    // Those moments' bytes; none when they were not received.
    common::Result<std::optional<common::Bytes>> read_moments(const std::string& assignment_id) const;
    bool has_moments(const std::string& assignment_id) const;
    void remove_moments(const std::string& assignment_id);
    // Best effort: a file left behind is removed at the next start (remove_orphan_files). The
    // kept decoded form, and the moments, go too.
    void remove(const std::string& assignment_id);

private:
    std::optional<common::DecodedDelta> take_kept(const std::string& assignment_id) const;

    StateDir state_;
    FileSystem& files_;
    std::uint64_t kept_bytes_;
    struct Kept {
        std::map<std::string, common::DecodedDelta> deltas;
        std::deque<std::string> order;  // oldest first
        std::uint64_t bytes = 0;
    };
    mutable std::mutex mutex_;  // guards kept_
    mutable Kept kept_;
};

}  // namespace tessera::server
