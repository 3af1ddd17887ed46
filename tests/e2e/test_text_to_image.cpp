// Text-to-image end to end, as an operator with a Python precompute runs it: a Python script
// (numpy and the standard library: tests/reference/write_captioned_shards.py) encodes captioned
// canvases of Fashion-MNIST items into a safetensors shard set and a webdataset tar of per-sample
// .npy/.npz files; `tessera-data import` adopts them; a dit-tiny-text task on a real
// tessera-server is trained by two real tessera-client volunteers over HTTP on loopback; the
// dashboard's gallery draws a row of samples per validation caption, the given captions first;
// and the export holds the EMA beside the model.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include <chrono>
#include <cmath>
#include <fstream>

#include "child_process.h"
#include "dataset_manifest.h"
#include "file_io.h"
#include "http_client.h"
#include "polling.h"
#include "safetensors.h"
#include "shell_run.h"
#include "temp_dir.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

constexpr std::int64_t kVersions = 16;       // merged versions the volunteers train to
constexpr std::int64_t kGalleryRows = 8;     // server/torch/torch_model.h, kGalleryCaptions
constexpr std::int64_t kSamplesPerRow = 8;   // server/torch/torch_model.cpp, kSamplesPerClass
constexpr std::uint32_t kCanvasPixels = 64;  // a canvas's side (docs/dataset_format.md)

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

boost::json::object stats_of(std::uint16_t port) {
    auto reply = http_get(port, "/api/v1/stats");
    return reply.status == 200 ? boost::json::parse(reply.body).as_object() : boost::json::object{};
}

std::int64_t version_of(std::uint16_t port) {
    auto stats = stats_of(port);
    return stats.contains("version") ? stats.at("version").as_int64() : -1;
}

// A python3 with numpy: the build's (-Dpython_torch), Debian's, or the one on PATH.
std::string python_with_numpy() {
    const char* configured = std::getenv("TESSERA_PYTHON");
    for (std::string candidate :
         {std::string(configured ? configured : ""), std::string("/usr/bin/python3"), std::string("python3")})
        if (!candidate.empty() && run_command(candidate + " -c 'import numpy'").status == 0) return candidate;
    return "";
}

std::uint32_t big_endian(const std::string& bytes, std::size_t at) {
    std::uint32_t value = 0;
    for (std::size_t i = 0; i < 4; ++i) value = (value << 8) | static_cast<unsigned char>(bytes.at(at + i));
    return value;
}

std::vector<std::string> strings_of(const boost::json::value& array) {
    std::vector<std::string> out;
    for (const auto& v : array.as_array()) out.emplace_back(v.as_string());
    return out;
}

}  // namespace

TEST_CASE("Python-written captioned shards, imported, trained by volunteers, sampled for their captions") {
    auto python = python_with_numpy();
    if (python.empty()) {
        MESSAGE("skipped: no python3 with numpy (Debian's python3-numpy)");
        return;
    }
    if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist")) {
        MESSAGE("skipped: no /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist)");
        return;
    }
    auto started = std::chrono::steady_clock::now();
    TempDir dir;
    auto data = dir / "data", shards = dir / "python", state = dir / "server";
    std::filesystem::create_directories(shards);

    // The canvases dataset the script takes its models from: the autoencoder (its encoder is
    // the script's VAE, its decoder draws the gallery) and the stand-in text encoder. Its own
    // 16 training canvases stay beside the 600 samples Python writes.
    auto prepared = run_tool("prepare canvases --out " + data.string() +
                             " --limit 16 --shard-size 16 --autoencoder-steps 50 --threads 1");
    REQUIRE_MESSAGE(prepared.status == 0, prepared.output);

    // The operator's precompute, in Python; the gallery's first rows are these captions, which
    // two by two have the same words in another order.
    const std::vector<std::string> given{"a dark bag left of a shoe", "a shoe left of a dark bag",
                                         "a light trouser above a boot", "a boot above a light trouser"};
    {
        std::ofstream captions(dir / "captions.txt");
        for (const auto& caption : given) captions << caption << "\n";
    }
    auto wrote = run_command(python + " " + required_env("TESSERA_CAPTION_WRITER") + " --models " + data.string() +
                             " --out " + shards.string() + " --captions " + (dir / "captions.txt").string() +
                             " --train 600 --validation 64");
    REQUIRE_MESSAGE(wrote.status == 0, wrote.output);
    auto written = boost::json::parse(wrote.output.substr(wrote.output.rfind('{'))).as_object();
    auto validation_captions = strings_of(written.at("captions"));
    REQUIRE(validation_captions.size() == static_cast<std::size_t>(kGalleryRows));
    CHECK(std::equal(given.begin(), given.end(), validation_captions.begin()));

    // Packed captions, padded ones with a tokenizer's mask, and a webdataset tar (.npy and
    // .npz samples), with the tar's validation set in place of the canvases'.
    auto imported = run_tool("import --out " + data.string() + " --validation " + (shards / "validation.tar").string() +
                             " " + (shards / "part-0.safetensors").string() + " " +
                             (shards / "part-1.safetensors").string() + " " + (shards / "part-2.tar").string());
    REQUIRE_MESSAGE(imported.status == 0, imported.output);
    CHECK(has(imported.output, "part-0.safetensors: 200 samples; "));
    CHECK(has(imported.output, "part-1.safetensors: 200 samples; "));
    CHECK(has(imported.output, "part-2.tar: 200 samples; "));
    CHECK(has(imported.output, "validation.tar: 64 samples; "));
    auto manifest = common::load_dataset_manifest(data / "dataset.json").value();
    CHECK(manifest.train.size() == 4);
    CHECK(manifest.validation.samples == 64);
    CHECK(manifest.text_dim == 64);
    CHECK(!manifest.decoder.file.empty());

    auto imported_at = seconds_since(started);

    REQUIRE(ChildProcess({required_env("TESSERA_SERVER"), "init", "--state", state.string()}).wait() == 0);
    REQUIRE(ChildProcess({required_env("TESSERA_SERVER"), "task", "create", "--state", state.string(), "--data",
                          data.string(), "--model", "dit-tiny-text", "--local-steps", "10", "--batch", "16",
                          "--target-seconds", "0", "--deadline", "60s", "--eval-interval", "1"})
                .wait() == 0);
    ChildProcess server(
        {required_env("TESSERA_SERVER"), "run", "--state", state.string(), "--listen", "127.0.0.1:0", "--tick", "1"});
    auto line = server.read_line();  // "tessera-server listening on http://127.0.0.1:PORT"
    REQUIRE_MESSAGE(has(line, "listening"), line);
    auto port = static_cast<std::uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)));
    REQUIRE(wait_for([&] { return stats_of(port).at("validation_loss").is_double(); }, std::chrono::seconds(60)));
    double loss0 = stats_of(port).at("validation_loss").as_double();
    auto serving_at = seconds_since(started);

    std::vector<std::unique_ptr<ChildProcess>> volunteers;
    for (const char* name : {"alice", "bob"})
        volunteers.push_back(std::make_unique<ChildProcess>(std::vector<std::string>{
            required_env("TESSERA_CLIENT"), "--server", "http://127.0.0.1:" + std::to_string(port), "--state",
            (dir / name).string(), "--device", "cpu", "--threads", "1", "--name", name, "--quiet"}));
    bool trained = wait_for([&] { return version_of(port) >= kVersions; }, std::chrono::seconds(240));
    for (auto& v : volunteers) v->signal(SIGINT);  // finish the unit, then stop
    for (auto& v : volunteers) CHECK(v->wait() == 0);
    REQUIRE(trained);
    auto trained_at = seconds_since(started);

    // Every returned result is judged and every accepted one merged.
    REQUIRE(wait_for(
        [&] {
            auto units = stats_of(port).at("work_units");
            return units.at("returned").as_int64() == 0 && units.at("accepted").as_int64() == 0;
        },
        std::chrono::seconds(60)));
    auto version = version_of(port);
    REQUIRE(wait_for([&] { return stats_of(port).at("evaluated_version").as_int64() == version; },
                     std::chrono::seconds(60)));
    auto stats = stats_of(port);
    auto merged = stats.at("work_units").at("merged").as_int64();
    auto rejected = stats.at("work_units").at("rejected").as_int64();
    double loss_end = stats.at("validation_loss").as_double();
    MESSAGE("version " << version << ": " << merged << " results merged, " << rejected << " rejected; validation loss "
                       << loss0 << " at version 0, " << loss_end << " now");
    CHECK(merged >= kVersions);
    CHECK(rejected * 4 <= merged);
    CHECK(loss_end < 0.8 * loss0);

    // The gallery draws the newest version: a row of samples per validation caption.
    boost::json::object samples;
    bool drawn = wait_for(
        [&] {
            auto reply = http_get(port, "/api/v1/samples");
            if (reply.status != 200) return false;
            samples = boost::json::parse(reply.body).as_object();
            return samples.at("version").is_int64() && samples.at("version").as_int64() == version;
        },
        std::chrono::seconds(120));
    REQUIRE_MESSAGE(drawn, boost::json::serialize(samples));
    MESSAGE("seconds from the start: shards written and imported " << imported_at << ", task served " << serving_at
                                                                   << ", trained " << trained_at << ", gallery drawn "
                                                                   << seconds_since(started));
    CHECK(samples.at("kind").as_string() == "images");
    CHECK(strings_of(samples.at("classes")) == validation_captions);
    auto image = http_get(port, std::string(samples.at("url").as_string()));
    REQUIRE(image.status == 200);
    CHECK(image.headers["content-type"] == "image/png");
    REQUIRE(image.body.size() > 24);
    CHECK(image.body.substr(0, 8) == "\x89PNG\r\n\x1a\n");
    CHECK(image.body.substr(12, 4) == "IHDR");
    CHECK(big_endian(image.body, 16) == kSamplesPerRow * kCanvasPixels);  // width
    CHECK(big_endian(image.body, 20) == kGalleryRows * kCanvasPixels);    // height: a row per caption

    server.signal(SIGTERM);
    CHECK(server.wait() == 0);

    // The export holds the model and its EMA (which lags it), both finite.
    auto exported = dir / "export.safetensors";
    REQUIRE(ChildProcess({required_env("TESSERA_SERVER"), "export", "--state", state.string(), "--out",
                          exported.string(), "--weights", "both"})
                .wait() == 0);
    auto bytes = common::read_file(exported, common::kMaxModelBytes).value();
    auto file = common::parse_safetensors(bytes).value();
    CHECK(file.metadata().at("model") == "dit-tiny-text");
    CHECK(file.metadata().at("version") == std::to_string(version));
    std::size_t models = 0, emas = 0, differ = 0;
    for (const auto& tensor : file.tensors()) {
        auto values = common::read_as_f32(tensor).value();
        CHECK_MESSAGE(std::all_of(values.begin(), values.end(), [](float x) { return std::isfinite(x); }), tensor.name);
        if (!tensor.name.starts_with("ema/")) {
            ++models;
            continue;
        }
        ++emas;
        auto* model = file.find(tensor.name.substr(4));
        REQUIRE_MESSAGE(model != nullptr, tensor.name);
        if (common::read_as_f32(*model).value() != values) ++differ;
    }
    CHECK(models > 0);
    CHECK(emas == models);
    CHECK(differ > 0);
}
