// The dashboard's routes (docs/dashboard.md): the page and its assets (embedded in the
// binary at build time), the run overview (/api/v1/stats), the charts' history and the
// sample images. Read-only and public. Thread-safe, like Api.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http_types.h"
#include "sample_gallery.h"
#include "state_dir.h"
#include "store.h"

namespace tessera::server {

// What the server knows about the run when it starts.
struct RunFacts {
    std::int64_t started_at = 0;              // the server process's start
    std::int64_t parameters = 0;              // values in the model
    std::vector<std::string> classes;         // the dataset's class names, for the samples' rows
    std::int64_t validation_set_samples = 0;  // the whole validation set; 0: unknown
    // What the samples panel shows: "images" (a grid per version, from the gallery),
    // "accuracy" (a classifier) or "none" (a generator without a decoder).
    std::string samples_kind = "none";
    StateDir state{""};  // its size is shown
};

class Dashboard {
public:
    // `gallery` is needed for samples_kind "images" only.
    Dashboard(Store& store, SampleGallery* gallery, RunFacts facts, Clock clock);
    // The dashboard's routes (the API's route table lists them): an embedded file by name
    // ("index.html" for /), the overview, the charts' history, the samples panel and a
    // version's sample image.
    Response page(const Request& request, std::string_view name);
    Response stats(const Request& request);
    StateUsage state_usage() const { return server::state_usage(facts_.state); }
    Response history(const Request& request);
    Response samples(const Request& request);
    Response sample_image(const Request& request, std::string_view name);

private:
    Store& store_;
    SampleGallery* gallery_;
    RunFacts facts_;
    Clock clock_;
};

}  // namespace tessera::server
