// Setting up server state: a fresh state directory (`init`) and a task from a dataset
// (`task create`). Shared by the commands and the tests.
#pragma once

#include <string>

#include "result.h"
#include "state_dir.h"
#include "store.h"
#include "task_config.h"

namespace tessera::server {

// Creates the directory, key, operator token and database; returns the token.
common::Result<std::string> initialize_state(const StateDir& state);

// A config with the dataset's shape and the policy's and the model's defaults for a new task
// (the flags then override it; the run-wide schedule comes after them: lr_schedule_from_flags,
// then default_lr for it).
common::Result<TaskConfig> default_task_config(const std::filesystem::path& data_dir, PolicyKind policy,
                                               const std::string& model);
// The samples in the dataset's training shards: what a default cosine spans passes over.
common::Result<std::int64_t> dataset_train_samples(const std::filesystem::path& data_dir);

// Checks the dataset, copies its shards into the blob store (through `files`), builds version 0
// and records the task.
common::Result<TaskRecord> create_task(const StateDir& state, Store& store, const TaskConfig& config,
                                       FileSystem& files = posix_file_system());

}  // namespace tessera::server
