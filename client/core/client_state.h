// The volunteer's state directory: its Ed25519 key (mode 0600), the identity it got at
// registration with the server key it pinned, the current work unit (so a restart resumes
// or abandons it), what it remembers between runs (the shards it holds, its speed), the
// error-feedback residual, the kept optimizer state, and the blob cache.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ed25519.h"
#include "result.h"

namespace tessera::client {

struct Identity {
    std::string server;  // the URL registered with
    std::string client_id;
    std::string server_public_key;  // base64, pinned at first registration
    std::string server_key_id;
};

// The work unit being computed: its signed envelope as received, and where it stands.
struct CurrentWork {
    std::string envelope_json;
    std::string wu_id;
    std::string phase;  // "training" or "uploading"; "ahead" for a unit fetched while another trained
};

// What a restarted volunteer should still know: which cached blobs are dataset shards (the
// server schedules by them), the training speed it last measured (the server sizes units by
// it) and the model it last trained from (the server sends patches from it).
constexpr std::size_t kMaxRememberedShards = 10000;  // ≈ 670 KiB of JSON, within read_json's 1 MiB

struct Remembered {
    std::vector<std::string> shards;  // SHA-256 hex
    double samples_per_s = 0;
    std::string model;  // SHA-256 hex of the model checkpoint last trained from, or ""
};

class ClientState {
public:
    explicit ClientState(std::filesystem::path root) : root_(std::move(root)) {}
    const std::filesystem::path& root() const { return root_; }
    std::filesystem::path cache_dir() const { return root_ / "cache"; }
    std::filesystem::path delta_file() const { return root_ / "current.delta"; }
    // The error-feedback residual (client/training/error_feedback.h).
    std::filesystem::path feedback_file() const { return root_ / "error_feedback.safetensors"; }
    // The kept inner optimizer state (client/training/optimizer_state.h).
    std::filesystem::path optimizer_file() const { return root_ / "optimizer_state.safetensors"; }
    // The kept state a unit resumed, until its upload is answered: a replay audit may ask for
    // it (docs/protocol.md, "Moments for an audit").
    std::filesystem::path moments_in_dir() const { return root_ / "moments-in"; }
    std::filesystem::path moments_in_file(const std::string& wu_id) const {
        return moments_in_dir() / (wu_id + ".safetensors");
    }
    // Keeps the kept state file (or `from`: an audit twin's downloaded moments) as `wu_id`'s
    // moments_in_file (a hard link: the state file is replaced, not rewritten, when the next
    // state is saved; a cached blob is unlinked, not rewritten) until its result is decided,
    // dropping any a day old (a crash or a lost answer left them) and all but the newest
    // kMaxKeptMoments (each holds 8 bytes per parameter).
    common::Status keep_moments_in(const std::string& wu_id, const std::filesystem::path& from = {}) const;
    static constexpr std::size_t kMaxKeptMoments = 4;

    // Loads the key, or creates it (0600) on first run.
    common::Result<common::SigningKey> load_or_create_key() const;
    common::Result<std::optional<Identity>> load_identity() const;
    common::Status save_identity(const Identity& identity) const;
    common::Result<std::optional<CurrentWork>> load_current() const;
    common::Status save_current(const CurrentWork& work) const;
    void clear_current() const;
    // The unit fetched ahead while another trained (client/look_ahead.h), until it is taken:
    // a restarted client gives it back.
    common::Result<std::optional<CurrentWork>> load_next() const;
    common::Status save_next(const CurrentWork& work) const;
    void clear_next() const;
    // A result delivered in the background while the next unit trains (client/result_delivery.h):
    // the current unit's record and delta moved aside (uploading.json, uploading.delta), so
    // that the next unit can become the current one. A restarted client uploads it.
    std::filesystem::path uploading_delta_file() const { return root_ / "uploading.delta"; }
    common::Status hand_over_upload() const;
    common::Result<std::optional<CurrentWork>> load_uploading() const;
    void clear_uploading() const;
    // Nothing remembered when the file is missing; an error when it is unreadable.
    common::Result<Remembered> load_remembered() const;
    common::Status save_remembered(const Remembered& remembered) const;

private:
    common::Result<std::optional<CurrentWork>> load_work(const std::string& file) const;
    common::Status save_work(const std::string& file, const CurrentWork& work) const;

    std::filesystem::path root_;
};

}  // namespace tessera::client
