// UnitDownloader: the model by patches or whole, then the shards.
#include "unit_download.h"

#include <chrono>

#include "model_patcher.h"
#include "progress_bar.h"
#include "sha256.h"

namespace tessera::client {

std::vector<std::string> blobs_of(const common::WorkUnit& unit) {
    std::vector<std::string> blobs{unit.model_blob.sha256};
    for (const auto& shard : unit.shards) blobs.push_back(shard.sha256);
    if (unit.moments) blobs.push_back(unit.moments->sha256);
    if (unit.check) {
        blobs.push_back(unit.check->result.sha256);
        blobs.push_back(unit.check->held_out.sha256);
    }
    return blobs;
}

ApiStatus UnitDownloader::download(UnitInHand& hand) {
    auto started = std::chrono::steady_clock::now();
    auto base = settings_.server;
    base.path += "/blobs";
    if (!hand.unit.blob_base_url.empty()) {
        auto parsed = parse_url(hand.unit.blob_base_url);
        if (!parsed) return ApiFailure{FailureKind::BadAnswer, "blob_base_url: " + parsed.message()};
        base = *parsed;
    }
    if (!hand.unit.patches.empty()) {
        auto patched = patch_model(hand, base);
        if (!patched && patched.error().kind == FailureKind::Stopped) return patched.error();
        if (patched) hand.model = *patched;
    }
    if (hand.model.empty()) {
        auto path = fetch_blob(hand.unit.model_blob, base, hand.model_bytes);
        if (!path) return path.error();
        hand.model = *path;
    }
    for (const auto& blob : hand.unit.shards) {
        auto path = fetch_blob(blob, base, hand.shard_bytes);
        if (!path) return path.error();
        hand.shards.push_back(*path);
    }
    if (hand.unit.moments) {
        auto path = fetch_blob(*hand.unit.moments, base, hand.model_bytes);
        if (!path) return path.error();
        hand.moments = *path;
    }
    if (hand.unit.check) {  // counted as data: a check's inputs besides the model
        auto result = fetch_blob(hand.unit.check->result, base, hand.shard_bytes);
        if (!result) return result.error();
        hand.check_result = *result;
        auto held_out = fetch_blob(hand.unit.check->held_out, base, hand.shard_bytes);
        if (!held_out) return held_out.error();
        hand.held_out = *held_out;
    }
    hand.download_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return {};
}

ApiResult<std::filesystem::path> UnitDownloader::patch_model(UnitInHand& hand, const Url& base) {
    const auto& unit = hand.unit;
    auto held = cache_.find(unit.patch_from);
    if (!held) return ApiFailure{FailureKind::Local, "the model the patches start from is no longer held"};
    std::vector<std::filesystem::path> patches;
    for (const auto& patch : unit.patches) {
        auto path = fetch_blob(patch, base, hand.patch_bytes);
        if (!path) {
            if (path.error().kind != FailureKind::Stopped)
                log_.error("patch " + common::short_hash(patch.sha256) + ": " + path.message() +
                           "; downloading the model whole");
            return path.error();
        }
        patches.push_back(*path);
    }
    auto built = build_patched_model(unit, *held, patches, cache_);
    if (!built) {
        log_.error("patches: " + built.message() + "; downloading the model whole");
        return ApiFailure{FailureKind::BadAnswer, built.message()};
    }
    log_.info("patched",
              "model version " + std::to_string(unit.base_version) + " built from " +
                  std::to_string(unit.patches.size()) + " patches",
              {{"patches", unit.patches.size()}});
    return *built;
}

ApiResult<std::filesystem::path> UnitDownloader::fetch_blob(const common::BlobRef& blob, const Url& base,
                                                            std::int64_t& downloaded) {
    bool held = cache_.find(blob.sha256).has_value();
    common::ProgressBar bar("fetch " + blob.sha256.substr(0, 8), blob.bytes);
    bool bars = settings_.progress_bars && !log_.quiet();
    auto download = [&] {
        auto path = cache_.ensure(blob, http_, base, [&](std::uint64_t done, std::uint64_t) {
            if (bars) bar.update(static_cast<std::int64_t>(done));
        });
        if (!path && settings_.on_failure) settings_.on_failure();
        return path;
    };
    auto what = "download of " + common::short_hash(blob.sha256);
    auto path = with_retries(download, settings_.give_up, log_, what, settings_.retry);
    if (!path && path.error().kind == FailureKind::BadAnswer) {  // corrupt in transit? once more
        log_.error(what + ": " + path.message() + "; downloading it again");
        path = with_retries(download, settings_.give_up, log_, what, settings_.retry);
    }
    if (path && bars) bar.finish(std::to_string(blob.bytes) + " bytes");
    if (path && !held) downloaded += blob.bytes;
    return path;
}

}  // namespace tessera::client
