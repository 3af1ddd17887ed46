// The experts' runs and their judged samples.
#include "expert_runs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <numeric>

#include "caption_judge.h"
#include "expert_clusters.h"

namespace tessera::bench {
namespace {

std::int64_t merged_samples(const RunResult& run) {
    return run.curve.empty() ? 0 : run.curve.at(run.budget_point).samples;
}

// Bytes per unit over every unit of `runs`.
void fill_volume(ExpertRow& row, const std::vector<const RunResult*>& runs) {
    double down = 0, up = 0;
    std::int64_t units = 0;
    for (const auto* run : runs) {
        down += run->bytes_down;
        up += run->bytes_up;
        units += run->units_issued;
        row.samples += merged_samples(*run);
    }
    if (units == 0) return;
    row.mb_down_per_unit = down / 1e6 / static_cast<double>(units);
    row.mb_up_per_unit = up / 1e6 / static_cast<double>(units);
}

// The fleet split so that each member's speed (samples/s, summed over its volunteers) is in
// proportion to its budget, so the members finish at about the same virtual time: the fastest
// volunteer to the member with the largest budget, and so on until each has one, then each next
// fastest to the member whose speed is the smallest share of its budget (ties: the lower member).
// A volunteer of no stated speed counts as 1 sample/s. Each member's volunteers in fleet order.
void split_fleet(const std::vector<SimVolunteer>& fleet, std::vector<MemberRun>& plan) {
    auto speed = [&](std::size_t v) { return fleet[v].samples_per_s > 0 ? fleet[v].samples_per_s : 1.0; };
    std::vector<std::size_t> fastest(fleet.size()), largest(plan.size());
    std::iota(fastest.begin(), fastest.end(), 0);
    std::iota(largest.begin(), largest.end(), 0);
    std::stable_sort(fastest.begin(), fastest.end(), [&](auto a, auto b) { return speed(a) > speed(b); });
    for (auto& m : plan) m.budget = std::max<std::int64_t>(1, m.budget);
    std::stable_sort(largest.begin(), largest.end(), [&](auto a, auto b) { return plan[a].budget > plan[b].budget; });
    std::vector<double> speeds(plan.size(), 0);
    std::vector<std::vector<std::size_t>> chosen(plan.size());
    for (std::size_t i = 0; i < fastest.size(); ++i) {
        auto member = largest[0];
        if (i < plan.size()) {
            member = largest[i];
        } else {
            auto share = [&](std::size_t m) { return speeds[m] / static_cast<double>(plan[m].budget); };
            for (std::size_t m = 0; m < plan.size(); ++m)
                if (share(m) < share(member) || (share(m) == share(member) && m < member)) member = m;
        }
        speeds[member] += speed(fastest[i]);
        chosen[member].push_back(fastest[i]);
    }
    for (std::size_t m = 0; m < plan.size(); ++m) {
        std::sort(chosen[m].begin(), chosen[m].end());
        for (auto v : chosen[m]) plan[m].fleet.push_back(fleet[v]);
    }
}

// `row` scored by the caption judge where there is one, else by the sample judge.
common::Status score_row(ExpertJudges judges, ExpertRow& row,
                         const std::function<common::Result<SampleFigures>(SampleJudge&)>& by_samples,
                         const std::function<common::Result<PromptFidelity>(CaptionJudge&)>& by_captions) {
    if (judges.captions != nullptr) {
        auto fidelity = by_captions(*judges.captions);
        if (!fidelity) return fidelity.error();
        row.fidelity = *fidelity;
        return {};
    }
    auto figures = by_samples(*judges.samples);
    if (!figures) return figures.error();
    row.figures = *figures;
    return {};
}

}  // namespace

common::Result<std::vector<RunResult>> run_expert_members(const std::filesystem::path& clusters, const std::string& run,
                                                          const std::string& expert_model, std::int64_t budget,
                                                          double router_share, const std::vector<SimVolunteer>& fleet,
                                                          const RunMember& run_member) {
    auto manifest = common::load_cluster_manifest(clusters / "clusters.json");
    if (!manifest) return common::with_context("--experts", manifest.error());
    if (manifest->experts < 2)
        return common::make_error("--experts needs two or more clusters (one expert is the monolithic run)");
    auto members_count = manifest->sizes.size() + 1;
    if (fleet.size() < members_count)
        return common::make_error("--experts needs a volunteer per member: " + std::to_string(members_count) +
                                  " or more");
    std::int64_t total = 0;
    for (auto size : manifest->sizes) total += size;
    std::vector<MemberRun> plan;
    for (std::size_t k = 0; k < manifest->sizes.size(); ++k) {
        auto share = static_cast<double>(manifest->sizes[k]) / static_cast<double>(total);
        plan.push_back({run + "-e" + std::to_string(k),
                        clusters / manifest->expert_dirs[k],
                        expert_model,
                        std::llround(static_cast<double>(budget) * (1 - router_share) * share),
                        {}});
    }
    plan.push_back({run + "-router",
                    clusters / manifest->router_dir,
                    "router",
                    std::llround(static_cast<double>(budget) * router_share),
                    {}});
    split_fleet(fleet, plan);
    std::vector<RunResult> members;
    for (const auto& member : plan) {
        auto result = run_member(member);
        if (!result) return common::with_context(member.name, result.error());
        members.push_back(std::move(*result));
    }
    return members;
}

common::Result<std::vector<ExpertRow>> judge_experts(ExpertJudges judges, const std::string& model,
                                                     const std::string& expert_model,
                                                     const std::vector<RunResult>& monolithic,
                                                     const std::vector<RunResult>& members,
                                                     const std::vector<std::string>& rules,
                                                     const common::ClusterManifest& clusters, double guidance) {
    if (judges.samples == nullptr && judges.captions == nullptr)
        return common::make_error("experts need a judge: --judge, or captioned canvases for the caption judge");
    std::vector<ExpertRow> rows;
    for (const auto& run : monolithic) {
        if (!run.budget_weights) continue;
        ExpertRow row;
        row.run = run.name;
        const auto& weights = *run.budget_weights;
        auto status = score_row(
            judges, row, [&](SampleJudge& judge) { return judge.figures(model, weights, guidance); },
            [&](CaptionJudge& judge) { return judge.score(model, weights, guidance); });
        if (!status) return common::with_context(run.name, status.error());
        fill_volume(row, {&run});
        rows.push_back(std::move(row));
    }
    if (members.size() < 3) return rows;
    std::vector<const common::NamedTensors*> experts;
    std::vector<const RunResult*> runs;
    for (std::size_t k = 0; k + 1 < members.size(); ++k) experts.push_back(members[k].budget_weights.get());
    for (const auto& member : members) runs.push_back(&member);
    const auto& router = members.back();
    for (const auto* weights : experts)
        if (weights == nullptr || !router.budget_weights) return common::make_error("an expert run kept no weights");
    auto group = members.front().name.substr(0, members.front().name.rfind("-e")) + "-experts";
    for (const auto& rule : rules) {
        ExpertRow row;
        row.run = group;
        row.experts = static_cast<std::int64_t>(experts.size());
        row.rule = rule;
        const auto& routing = *router.budget_weights;
        auto status = score_row(
            judges, row,
            [&](SampleJudge& judge) {
                return judge.routed_figures(expert_model, experts, routing, rule, clusters, guidance);
            },
            [&](CaptionJudge& judge) {
                return judge.routed_score(expert_model, experts, routing, rule, clusters, guidance);
            });
        if (!status) return common::with_context(group + " " + rule, status.error());
        row.router_accuracy = router.final_accuracy;
        fill_volume(row, runs);
        rows.push_back(std::move(row));
    }
    return rows;
}

common::Status write_experts_csv(const std::filesystem::path& path, const std::vector<ExpertRow>& rows) {
    std::ofstream out(path);
    out << "run,experts,routing,samples,cas,fid,mb_down_per_unit,mb_up_per_unit,router_accuracy,object,relation,"
           "attribute,heldout\n";
    for (const auto& r : rows)
        out << r.run << "," << r.experts << "," << r.rule << "," << r.samples << "," << r.figures.cas << ","
            << r.figures.fid << "," << r.mb_down_per_unit << "," << r.mb_up_per_unit << "," << r.router_accuracy << ","
            << r.fidelity.object << "," << r.fidelity.relation << "," << r.fidelity.attribute << ","
            << r.fidelity.heldout << "\n";
    if (!out) return common::make_error("cannot write " + path.string());
    return {};
}

void print_experts(std::ostream& out, const std::vector<ExpertRow>& rows) {
    bool captions = !rows.empty() && rows.front().fidelity.object >= 0;
    out << "experts against the monolithic model ("
        << (captions ? "prompt fidelity: higher is better"
                     : "CAS: higher is better; FID on the judge's features: lower")
        << ")\n";
    char line[200];
    std::snprintf(line, sizeof line, "%-20s %7s %12s %9s %8s %8s %9s %9s %7s\n", "run", "experts", "routing", "samples",
                  captions ? "object" : "cas", captions ? "relation" : "fid", "MB down", "MB up", "router");
    out << line;
    for (const auto& r : rows) {
        auto first = captions ? r.fidelity.object : r.figures.cas;
        auto second = captions ? r.fidelity.relation : r.figures.fid;
        std::snprintf(line, sizeof line, "%-20s %7lld %12s %9lld %8.3f %8.3f %9.4f %9.4f %7.3f\n", r.run.c_str(),
                      static_cast<long long>(r.experts), r.rule.empty() ? "-" : r.rule.c_str(),
                      static_cast<long long>(r.samples), first, second, r.mb_down_per_unit, r.mb_up_per_unit,
                      r.router_accuracy);
        out << line;
    }
}

}  // namespace tessera::bench
