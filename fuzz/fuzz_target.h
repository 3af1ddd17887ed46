// One fuzz target: libFuzzer's entry point over bytes a peer controls, and the seed inputs it
// starts from (real files and messages, made by the code that writes them). Built two ways
// (fuzz/meson.build): with libFuzzer under clang, ASan and UBSan (scripts/fuzz), and with
// replay_main.cpp for the test suite, which runs the seeds and mutations of them for a few
// seconds. A target must not crash, hang or allocate without bound on any input.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "bytes.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

// Inputs worth starting from: what the real writers produce.
std::vector<tessera::common::Bytes> fuzz_seeds();

// A directory of this process's for targets whose readers take a path, removed when it exits.
inline const std::filesystem::path& fuzz_scratch_directory() {
    struct Scratch {
        std::filesystem::path path =
            std::filesystem::temp_directory_path() / ("tessera-fuzz-" + std::to_string(::getpid()));
        Scratch() { std::filesystem::create_directories(path); }
        ~Scratch() {
            std::error_code ignored;
            std::filesystem::remove_all(path, ignored);
        }
    };
    static const Scratch scratch;
    return scratch.path;
}
