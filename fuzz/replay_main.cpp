// Runs a fuzz target without libFuzzer, for the test suite: its seeds, then mutations of them
// (bit flips, truncations, repeated and random bytes, splices) from a fixed random seed until
// the time is up. Also replays given files (a crash libFuzzer found), and writes the seeds as a
// corpus for libFuzzer (scripts/fuzz).
//   fuzz_NAME [--seconds N] [--write-seeds DIR] [FILE...]
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>

#include "file_io.h"
#include "fuzz_target.h"

using tessera::common::Bytes;

namespace {

Bytes mutated(const std::vector<Bytes>& seeds, std::mt19937_64& rng) {
    Bytes input = seeds[rng() % seeds.size()];
    int edits = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < edits; ++i) {
        auto at = input.empty() ? 0 : rng() % input.size();
        switch (rng() % 6) {
            case 0:
                if (!input.empty()) input[at] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
                break;
            case 1: input.resize(at); break;
            case 2:
                if (!input.empty()) input[at] = static_cast<std::uint8_t>(rng());
                break;
            case 3: input.insert(input.begin() + static_cast<std::ptrdiff_t>(at), rng() % 16, 0xff); break;
            case 4: {
                const auto& other = seeds[rng() % seeds.size()];
                auto from = other.empty() ? 0 : rng() % other.size();
                input.insert(input.begin() + static_cast<std::ptrdiff_t>(at),
                             other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
                break;
            }
            default:
                if (!input.empty()) input[at] = static_cast<std::uint8_t>(rng() % 2 ? 0 : 0x80);
        }
    }
    return input;
}

void run(const Bytes& input) { LLVMFuzzerTestOneInput(input.data(), input.size()); }

}  // namespace

int main(int argc, char** argv) {
    double seconds = 2;
    std::vector<std::string> files;
    auto seeds = fuzz_seeds();
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "--seconds" && i + 1 < argc) {
            seconds = std::stod(argv[++i]);
        } else if (arg == "--write-seeds" && i + 1 < argc) {
            std::filesystem::path dir = argv[++i];
            std::filesystem::create_directories(dir);
            for (std::size_t s = 0; s < seeds.size(); ++s)
                if (auto written = tessera::common::write_file_atomic(dir / ("seed-" + std::to_string(s)), seeds[s]);
                    !written) {
                    std::cerr << written.message() << "\n";
                    return 1;
                }
            return 0;
        } else {
            files.push_back(arg);
        }
    }
    if (seeds.empty()) {
        std::cerr << "no seeds: the target's writers made nothing\n";
        return 1;
    }
    for (const auto& file : files) run(tessera::common::read_file(file, 1 << 30).value());
    if (!files.empty()) return 0;
    for (const auto& seed : seeds) run(seed);
    std::mt19937_64 rng(20261127);
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    std::uint64_t runs = seeds.size();
    while (std::chrono::steady_clock::now() < end) {
        run(mutated(seeds, rng));
        ++runs;
    }
    std::cout << runs << " inputs from " << seeds.size() << " seeds, none crashed\n";
    return 0;
}
