// The volunteer's state directory: its Ed25519 key (mode 0600), the identity it got at
// registration with the server key it pinned, the current work unit (so a restart resumes
// or abandons it), and the blob cache.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "ed25519.h"
#include "result.h"

namespace tessera::client {

struct Identity {
    std::string server;             // the URL registered with
    std::string client_id;
    std::string server_public_key;  // base64, pinned at first registration
    std::string server_key_id;
};

// The work unit being computed: its signed envelope as received, and where it stands.
struct CurrentWork {
    std::string envelope_json;
    std::string wu_id;
    std::string phase;  // "training" or "uploading"
};

class ClientState {
public:
    explicit ClientState(std::filesystem::path root) : root_(std::move(root)) {}
    const std::filesystem::path& root() const { return root_; }
    std::filesystem::path cache_dir() const { return root_ / "cache"; }
    std::filesystem::path delta_file() const { return root_ / "current.delta"; }

    // Loads the key, or creates it (0600) on first run.
    common::Result<common::SigningKey> load_or_create_key() const;
    common::Result<std::optional<Identity>> load_identity() const;
    common::Status save_identity(const Identity& identity) const;
    common::Result<std::optional<CurrentWork>> load_current() const;
    common::Status save_current(const CurrentWork& work) const;
    void clear_current() const;

private:
    std::filesystem::path root_;
};

}  // namespace tessera::client
