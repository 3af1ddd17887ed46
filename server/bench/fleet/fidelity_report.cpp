// Prompt fidelity printed and written: shares as 0.000–1.000, "-" (or empty) where unscored.
#include "fidelity_report.h"

#include <cstdio>
#include <fstream>
#include <string>

namespace tessera::bench {
namespace {

std::string share(double value, const char* format) {
    if (value < 0) return "";
    char text[32];
    std::snprintf(text, sizeof text, format, value);
    return text;
}

std::string shown(double value) { return value < 0 ? "-" : share(value, "%.3f"); }

// ",object,relation,attribute,heldout,heldout_object" of a csv row.
std::string csv_cells(const PromptFidelity& f) {
    std::string cells;
    for (double value : {f.object, f.relation, f.attribute, f.heldout, f.heldout_object})
        cells += "," + share(value, "%.4f");
    return cells;
}

}  // namespace

void print_fidelity(std::ostream& out, const std::vector<RunResult>& runs, const std::vector<double>& guidances,
                    const PromptFidelity& ceilings, std::int64_t captions) {
    out << "prompt fidelity on " << captions
        << " validation and held-out captions (object: both named items; relation: and A placed as said; "
           "attribute: dark/light named; held-out: relation on unseen scenes; held-obj: their objects)\n";
    char head[128];
    std::snprintf(head, sizeof head, "%-14s %8s %8s %8s %8s %8s %8s\n", "run", "guidance", "object", "relation",
                  "attrib", "held-out", "held-obj");
    out << head;
    auto line = [&](const std::string& name, const std::string& guidance, const PromptFidelity& f) {
        char text[160];
        std::snprintf(text, sizeof text, "%-14s %8s %8s %8s %8s %8s %8s\n", name.c_str(), guidance.c_str(),
                      shown(f.object).c_str(), shown(f.relation).c_str(),
                      shown(f.attribute).c_str(), shown(f.heldout).c_str(),
                      shown(f.heldout_object).c_str());
        out << text;
    };
    line("ceiling", "real", ceilings);
    for (const auto& run : runs)
        for (std::size_t i = 0; i < run.fidelity_by_guidance.size() && i < guidances.size(); ++i)
            line(run.name, share(guidances[i], "%.1f"), run.fidelity_by_guidance[i]);
}

common::Status write_fidelity_csv(const std::filesystem::path& path, const std::vector<RunResult>& runs,
                                  const std::vector<double>& guidances, const PromptFidelity& ceilings) {
    std::ofstream out(path);
    out << "run,guidance,object,relation,attribute,heldout,heldout_object\n";
    out << "ceiling,real" << csv_cells(ceilings) << "\n";
    for (const auto& run : runs)
        for (std::size_t i = 0; i < run.fidelity_by_guidance.size() && i < guidances.size(); ++i)
            out << run.name << "," << guidances[i] << csv_cells(run.fidelity_by_guidance[i]) << "\n";
    out.close();
    if (!out) return common::make_error("cannot write " + path.string());
    return {};
}

}  // namespace tessera::bench
