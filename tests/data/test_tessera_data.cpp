// tessera-data: prepare (files, hashes, reconstruction bound, reuse), IDX and shard
// validation, inspect, import, and the command line itself.
#include <torch/torch.h>

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <zlib.h>

#include "dataset_manifest.h"
#include "doctest_after_torch.h"
#include "file_io.h"
#include "shell_run.h"
#include "idx_file.h"
#include "import_command.h"
#include "inspect_command.h"
#include "small_dataset.h"
#include "torch/shard_data.h"
#include "torch/tensor_convert.h"
#include "zstd_codec.h"

using namespace tessera::common;
using tessera::testing::TempDir;

namespace {

using tessera::testing::Run;
using tessera::testing::run_tool;

void write_gz(const std::filesystem::path& path, const Bytes& bytes) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
}

Bytes shard_bytes(const TorchTensorMap& tensors) { return to_safetensors(tensors).value(); }

}  // namespace

TEST_CASE("prepare writes complete, hashed shards with unit-variance latents") {
    const auto& dir = tessera::testing::small_latent_dataset();
    auto manifest = load_dataset_manifest(dir / "dataset.json");
    REQUIRE(manifest.ok());
    CHECK(manifest->kind == "latents");
    CHECK(manifest->sample_shape == std::vector<std::int64_t>{4, 8, 8});
    CHECK(manifest->classes.size() == 10);
    CHECK(manifest->classes[9] == "Ankle boot");
    CHECK(manifest->train.size() == 4);
    CHECK(verify_dataset_files(dir, *manifest).ok());
    CHECK(std::filesystem::exists(dir / "preview.png"));

    std::int64_t samples = 0;
    std::vector<ShardData> shards;
    for (const auto& f : manifest->train) {
        samples += f.samples;
        shards.push_back(load_shard_file(dir / f.file).value());
    }
    CHECK(samples == tessera::testing::kSmallDatasetImages);
    auto all = concat_shards(shards).value();
    CHECK(all.inputs.std().item<double>() == doctest::Approx(1.0).epsilon(0.05));
    // The briefly trained autoencoder already reconstructs far better than an untrained one
    // (about 0.6); the full 2000-step run reaches about 0.01 (docs/dataset_format.md).
    CHECK(manifest->reconstruction_mse > 0);
    CHECK(manifest->reconstruction_mse < 0.08);
}

TEST_CASE("a second prepare reuses the dataset; a damaged one is prepared again") {
    TempDir dir;
    tessera::data::PrepareOptions options;
    options.out = dir.path();
    options.pixels = true;
    options.limit = 1000;
    REQUIRE(tessera::data::prepare_fashion_mnist(options).ok());
    auto first = std::filesystem::last_write_time(dir / "train-000.safetensors.zst");
    REQUIRE(tessera::data::prepare_fashion_mnist(options).ok());
    CHECK(std::filesystem::last_write_time(dir / "train-000.safetensors.zst") == first);

    write_file_atomic(dir / "train-000.safetensors.zst", as_bytes("damaged")).ok();
    auto manifest = load_dataset_manifest(dir / "dataset.json").value();
    CHECK_FALSE(verify_dataset_files(dir.path(), manifest).ok());
    REQUIRE(tessera::data::prepare_fashion_mnist(options).ok());
    CHECK(verify_dataset_files(dir.path(), load_dataset_manifest(dir / "dataset.json").value()).ok());
}

TEST_CASE("IDX files that lie about their size or type are refused") {
    TempDir dir;
    Bytes good{0, 0, 8, 1, 0, 0, 0, 3, 7, 8, 9};
    write_gz(dir / "good.gz", good);
    auto parsed = tessera::data::read_idx_file(dir / "good.gz");
    REQUIRE(parsed.ok());
    CHECK(parsed->values == Bytes{7, 8, 9});

    Bytes short_data{0, 0, 8, 1, 0, 0, 0, 4, 7, 8, 9};
    write_gz(dir / "short.gz", short_data);
    CHECK(tessera::data::read_idx_file(dir / "short.gz").message().find("promises 4") != std::string::npos);
    Bytes floats{0, 0, 0x0d, 1, 0, 0, 0, 1, 0, 0, 0, 0};
    write_gz(dir / "floats.gz", floats);
    CHECK(tessera::data::read_idx_file(dir / "floats.gz").message().find("not an IDX") != std::string::npos);
    Bytes huge{0, 0, 8, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    write_gz(dir / "huge.gz", huge);
    CHECK(tessera::data::read_idx_file(dir / "huge.gz").message().find("exceed") != std::string::npos);
    auto gz = read_file(dir / "good.gz", 1000).value();
    gz.resize(gz.size() / 2);
    write_file_atomic(dir / "cut.gz", gz).ok();
    CHECK_FALSE(tessera::data::read_idx_file(dir / "cut.gz").ok());
}

TEST_CASE("corrupt or inconsistent shards give clear errors") {
    auto n3 = torch::zeros({3, 4, 8, 8});
    CHECK(load_shard(shard_bytes({{"latents", n3}})).message().find("no \"labels\"") != std::string::npos);
    CHECK(load_shard(shard_bytes({{"latents", n3}, {"labels", torch::zeros({2}, torch::kInt64)}}))
              .message()
              .find("3 inputs but 2 labels") != std::string::npos);
    CHECK(load_shard(
              shard_bytes(
                  {{"latents", n3}, {"pixels", n3.to(torch::kUInt8)}, {"labels", torch::zeros({3}, torch::kInt64)}}))
              .message()
              .find("exactly one") != std::string::npos);
    CHECK(load_shard(shard_bytes({{"latents", n3}, {"labels", torch::zeros({3}, torch::kInt32)}}))
              .message()
              .find("I64") != std::string::npos);
    CHECK(load_shard(shard_bytes({{"latents", torch::zeros({3, 4})}, {"labels", torch::zeros({3}, torch::kInt64)}}))
              .message()
              .find("[N, C, H, W]") != std::string::npos);
    CHECK(load_shard(shard_bytes({{"latents", n3 / 0.0}, {"labels", torch::zeros({3}, torch::kInt64)}}))
              .message()
              .find("non-finite") != std::string::npos);
    CHECK_FALSE(load_shard(as_bytes("not a shard at all")).ok());
    auto good = shard_bytes({{"latents", n3.to(torch::kFloat16)}, {"labels", torch::zeros({3}, torch::kInt64)}});
    CHECK(load_shard(good).ok());
    auto packed = zstd_compress(good).value();
    CHECK(load_shard(packed).ok());
    packed.resize(packed.size() - 5);
    CHECK(load_shard(packed).message().find("zstd") != std::string::npos);
}

TEST_CASE("inspect prints each tensor's dtype, shape and statistics") {
    const auto& dir = tessera::testing::small_latent_dataset();
    std::ostringstream out;
    REQUIRE(tessera::data::inspect_tensor_file(dir / "train-000.safetensors.zst", out).ok());
    CHECK(out.str().find("(zstd)") != std::string::npos);
    CHECK(out.str().find("latents  F16 [1000, 4, 8, 8]") != std::string::npos);
    CHECK(out.str().find("labels  I64 [1000]  min 0 max 9") != std::string::npos);
    std::ostringstream bad;
    CHECK_FALSE(tessera::data::inspect_tensor_file(dir / "dataset.json", bad).ok());
}

TEST_CASE("import adopts shards written elsewhere and refuses bad ones without writing") {
    TempDir source, dir;
    // Stable-Diffusion-like latents (4x32x32, f32) with 1000 classes, as Python would write them.
    auto write = [&](const std::string& name, const TorchTensorMap& tensors) {
        REQUIRE(write_file_atomic(source / name, shard_bytes(tensors)).ok());
        return source / name;
    };
    auto a = write("a.safetensors", {{"latents", torch::randn({5, 4, 32, 32})},
                                     {"labels", torch::tensor({1, 2, 999, 4, 5}, torch::kInt64)}});
    auto v = write("v.safetensors",
                   {{"latents", torch::randn({2, 4, 32, 32})}, {"labels", torch::tensor({0, 1}, torch::kInt64)}});
    auto wrong = write("w.safetensors",
                       {{"latents", torch::randn({2, 4, 16, 16})}, {"labels", torch::tensor({0, 1}, torch::kInt64)}});
    auto broken = write("b.safetensors", {{"latents", torch::randn({2, 4, 32, 32})}});

    tessera::data::ImportOptions options;
    options.out = dir.path();
    options.shards = {a};
    CHECK(tessera::data::import_shards(options).message().find("--validation") != std::string::npos);
    options.validation = v;
    options.scale_factor = 0.18215;
    REQUIRE(tessera::data::import_shards(options).ok());
    auto manifest = load_dataset_manifest(dir / "dataset.json").value();
    CHECK(manifest.sample_shape == std::vector<std::int64_t>{4, 32, 32});
    CHECK(manifest.classes.size() == 1000);
    CHECK(manifest.scale_factor == doctest::Approx(0.18215));
    CHECK(manifest.train.size() == 1);
    CHECK(verify_dataset_files(dir.path(), manifest).ok());

    options.validation.clear();
    options.shards = {wrong};
    CHECK(tessera::data::import_shards(options).message().find("does not match") != std::string::npos);
    options.shards = {a, broken};
    CHECK(tessera::data::import_shards(options).message().find("labels") != std::string::npos);
    CHECK(load_dataset_manifest(dir / "dataset.json").value().train.size() == 1);
}

TEST_CASE("the command line reports misuse clearly") {
    auto none = run_tool("");
    CHECK(none.status == 2);
    CHECK(none.output.find("usage: tessera-data") != std::string::npos);
    auto unknown = run_tool("frobnicate");
    CHECK(unknown.status == 2);
    auto no_out = run_tool("prepare fashion-mnist");
    CHECK(no_out.status == 1);
    CHECK(no_out.output.find("--out") != std::string::npos);
    auto other = run_tool("prepare cifar10 --out /tmp/x");
    CHECK(other.output.find("fashion-mnist") != std::string::npos);
    auto missing = run_tool("inspect /nonexistent/file");
    CHECK(missing.status == 1);
    CHECK(missing.output.find("cannot open") != std::string::npos);
    auto bad_option = run_tool("prepare fashion-mnist --out /tmp/x --shard-size many");
    CHECK(bad_option.status == 2);  // a usage mistake, as with every command (command_line.h)
    CHECK(bad_option.output.find("tessera-data prepare: ") != std::string::npos);
}
