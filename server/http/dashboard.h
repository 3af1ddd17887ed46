// The dashboard's routes (docs/dashboard.md): the page and its assets (embedded in the
// binary at build time), the list of tasks, and per task the overview (/api/v1/stats), the
// charts' history and the sample images. Read-only and public. Thread-safe, like Api.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "clock.h"
#include "http_types.h"
#include "sample_gallery.h"
#include "state_dir.h"
#include "store.h"
#include "task_lookup.h"

namespace tessera::server {

// What the dashboard shows of a task beside its records, fixed when this process starts
// serving it.
struct TaskFacts {
    std::int64_t parameters = 0;              // values in the model
    std::vector<std::string> classes;         // the dataset's class names, for the samples' rows
    std::int64_t validation_set_samples = 0;  // the whole validation set; 0: unknown
    // What the samples panel shows: "images" (a grid per version, from the gallery),
    // "accuracy" (a classifier) or "none" (a generator without a decoder).
    std::string samples_kind = "none";
    std::shared_ptr<SampleGallery> gallery;  // for "images"
    // A text task's prompts (typed words or the dataset's captions), drawn by `gallery`; null
    // for a class task, and with `prompts_error` for a text task whose prompts failed to load.
    std::shared_ptr<const PromptBook> prompts;
    std::string prompts_error;
    // An expert group's router: the rule its gallery draws the group by (docs/experts.md).
    std::string routing;
};
// The facts of a task this process serves; null for one it does not serve.
using TaskFactsLookup = std::function<std::shared_ptr<const TaskFacts>(const std::string& task_id)>;

// What the server knows about itself when it starts.
struct RunFacts {
    std::int64_t started_at = 0;  // the server process's start
    StateDir state{""};           // its size is shown
    FileSystem* files = &posix_file_system();
};

class Dashboard {
public:
    Dashboard(Store& store, TaskFactsLookup task_facts, RunFacts facts, Clock clock);
    // The dashboard's routes (the API's route table lists them): an embedded file by name
    // ("index.html" for /), every task, and per task the overview, the charts' history, the
    // samples panel and a version's sample image. `task_id` empty: the current task (the
    // newest unfinished one; the routes without a task id).
    Response page(const Request& request, std::string_view name);
    Response tasks(const Request& request);
    Response stats(const Request& request, const std::string& task_id = "");
    // The state directory's parts; with a PostgreSQL database, that database's size.
    StateUsage state_usage() const;
    Response history(const Request& request, const std::string& task_id = "");
    Response samples(const Request& request, const std::string& task_id = "");
    Response sample_image(const Request& request, const std::string& task_id, std::string_view name);
    // What prompts a task can draw (its captions, the encoder's words, the guidance range), and
    // a prompt's row of samples (?prompt=WORDS or ?caption=N, &cfg=G, &seed=S): the PNG, or 202
    // while it is drawn or waits its turn (docs/dashboard.md, "Prompts").
    Response prompts(const Request& request, const std::string& task_id = "");
    Response prompt_image(const Request& request, const std::string& task_id = "");

private:
    // The task a route names, or the current one (nullopt: none); a 404 for an unknown id.
    std::variant<std::optional<TaskView>, Response> task_of(const Request& request, const std::string& task_id);

    Store& store_;
    TaskFactsLookup task_facts_;
    RunFacts facts_;
    Clock clock_;
};

}  // namespace tessera::server
