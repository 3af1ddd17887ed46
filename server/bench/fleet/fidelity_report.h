// The prompt-fidelity part of a fleet campaign's report: a table on stdout and fidelity.csv,
// a row per run and guidance scale, with the judge's ceilings (real canvases, decoded) first.
#pragma once

#include <filesystem>
#include <ostream>
#include <vector>

#include "fleet_run.h"
#include "prompt_fidelity.h"
#include "result.h"

namespace tessera::bench {

void print_fidelity(std::ostream& out, const std::vector<RunResult>& runs, const std::vector<double>& guidances,
                    const PromptFidelity& ceilings, std::int64_t captions);
common::Status write_fidelity_csv(const std::filesystem::path& path, const std::vector<RunResult>& runs,
                                  const std::vector<double>& guidances, const PromptFidelity& ceilings);

}  // namespace tessera::bench
