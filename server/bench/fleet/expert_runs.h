// Decentralized experts in the fleet simulator (`tessera-bench fleet --experts DIR`, docs/
// fleet_simulator.md "Experts against the monolithic model"): each expert of a `tessera-data
// cluster` folder and its router run as their own simulations on their own datasets — exact, since
// nothing passes between them — on the campaign's fleet, the samples budget split by cluster size
// after the router's share; then the experts are sampled through the router by each routing rule
// and judged beside the monolithic runs' samples — CAS and FID for a class task, prompt fidelity
// for captioned canvases — with the bytes a unit moves.
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "fleet_run.h"
#include "expert_clusters.h"
#include "fleet_spec.h"
#include "prompt_fidelity.h"
#include "result.h"
#include "sample_judge.h"

namespace tessera::bench {

class CaptionJudge;

// One row of experts.csv: a monolithic run, or the expert group under one routing rule.
struct ExpertRow {
    std::string run;           // "fedasync", or "fedasync-experts" for the group
    std::int64_t experts = 1;  // 1: the monolithic model
    std::string rule;          // the routing rule; "" for a monolithic run
    std::int64_t samples = 0;  // merged at the budget points, over every member for the group
    SampleFigures figures;     // a class task's (-1 for captioned canvases)
    PromptFidelity fidelity;   // captioned canvases' (-1 for a class task)
    double mb_down_per_unit = 0;  // over every unit of its runs
    double mb_up_per_unit = 0;
    double router_accuracy = -1;  // the router's validation accuracy (the group only)
};

// One member's run: its name ("fedasync-e0", "fedasync-router"), dataset, preset, samples budget
// and volunteers.
struct MemberRun {
    std::string name;
    std::filesystem::path data;
    std::string model;
    std::int64_t budget = 0;
    std::vector<SimVolunteer> fleet;
};
using RunMember = std::function<common::Result<RunResult>(const MemberRun& member)>;

// The members' runs, experts in cluster order and the router last. Needs two or more experts.
// The router gets `router_share` of the budget, the experts the rest by cluster size; the fleet
// is split among them (at least one volunteer each, as a volunteer keeps one member of a group,
// docs/experts.md) so that each member's summed speed is in proportion to its budget, the
// fastest volunteers first: the members finish at about the same virtual time.
common::Result<std::vector<RunResult>> run_expert_members(const std::filesystem::path& clusters, const std::string& run,
                                                          const std::string& expert_model, std::int64_t budget,
                                                          double router_share, const std::vector<SimVolunteer>& fleet,
                                                          const RunMember& run_member);

// Who judges a group: the caption judge where there is one (captioned canvases), else the
// sample judge (a class task).
struct ExpertJudges {
    SampleJudge* samples = nullptr;
    CaptionJudge* captions = nullptr;
};

// The rows: each monolithic run that has weights (judged as `model`), then the group (its experts
// of preset `expert_model`) by rule, the -class and -caption rules from the `clusters`.
common::Result<std::vector<ExpertRow>> judge_experts(ExpertJudges judges, const std::string& model,
                                                     const std::string& expert_model,
                                                     const std::vector<RunResult>& monolithic,
                                                     const std::vector<RunResult>& members,
                                                     const std::vector<std::string>& rules,
                                                     const common::ClusterManifest& clusters, double guidance);

common::Status write_experts_csv(const std::filesystem::path& path, const std::vector<ExpertRow>& rows);
void print_experts(std::ostream& out, const std::vector<ExpertRow>& rows);

}  // namespace tessera::bench
