// tessera-data import for text-to-image data: the tar, .npy and .npz readers on damaged bytes,
// webdataset tars to shards, captions packed whatever layout they came in, the byte counts
// import and inspect report, and files written by Python's tarfile and numpy.
#include <torch/torch.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "caption_text.h"
#include "corrupt.h"
#include "dataset_manifest.h"
#include "doctest_after_torch.h"
#include "file_io.h"
#include "shell_run.h"
#include "import_command.h"
#include "inspect_command.h"
#include "npy_reader.h"
#include "safetensors.h"
#include "tar_reader.h"
#include "temp_dir.h"
#include "torch/shard_data.h"
#include "torch/tensor_convert.h"
#include "webdataset.h"
#include "webdataset_files.h"
#include "zip_reader.h"
#include "zstd_codec.h"

using namespace tessera::common;
using tessera::testing::FileBytes;
using tessera::testing::TempDir;
namespace data = tessera::data;
namespace t = tessera::testing;

namespace {

constexpr std::uint16_t kF16One = 0x3c00, kF16NaN = 0x7e00;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string wds_error(const std::vector<t::TarEntry>& entries) {
    auto r = data::webdataset_to_shard(t::tar(entries));
    return r ? "" : r.message();
}

FileBytes f16_latent(std::vector<std::int64_t> shape = {4, 2, 2}, std::uint16_t fill = kF16One) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return t::npy<std::uint16_t>("<f2", shape, std::vector<std::uint16_t>(static_cast<std::size_t>(n), fill));
}

FileBytes f32_feature(std::int64_t tokens, std::int64_t width, float fill = 0.5f) {
    return t::npy<float>("<f4", {tokens, width}, std::vector<float>(static_cast<std::size_t>(tokens * width), fill));
}

FileBytes mask(std::vector<std::int64_t> values) {
    return t::npy<std::int64_t>("<i8", {static_cast<std::int64_t>(values.size())}, values);
}

// A good sample's files: latent [4, 2, 2] f16, 5 caption tokens of width 3 of which 3 count.
std::vector<t::TarEntry> sample(const std::string& key) {
    return {{key + ".latent.npy", f16_latent()},
            {key + ".t5.npy", f32_feature(5, 3)},
            {key + ".mask.npy", mask({1, 1, 1, 0, 0})},
            {key + ".txt", t::bytes_of("a caption of " + key + "\n")}};
}

std::vector<t::TarEntry> join(std::vector<t::TarEntry> a, const std::vector<t::TarEntry>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// The decompressed safetensors of a stored dataset file.
Bytes stored_raw(const std::filesystem::path& path) {
    auto bytes = read_file(path, kMaxShardBytes).value();
    return is_zstd_frame(bytes) ? zstd_decompress(bytes, kMaxShardBytes).value() : bytes;
}

std::vector<std::string> tensor_names(const Bytes& raw) {
    std::vector<std::string> names;
    auto file = parse_safetensors(raw).value();
    for (const auto& v : file.tensors()) names.push_back(v.name);
    return names;
}

std::vector<std::string> directory_listing(const std::filesystem::path& dir) {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename());
    std::sort(names.begin(), names.end());
    return names;
}

tessera::testing::Run run(const std::string& command) { return tessera::testing::run_command(command); }

}  // namespace

TEST_CASE("a webdataset tar becomes one shard with packed captions") {
    auto entries = join(sample("000"), sample("001"));
    entries.push_back({"001.cls", t::bytes_of(" 7\n")});
    entries.push_back({"001.jpg", t::bytes_of("an image, skipped")});
    entries.push_back({"002.npz", t::zip({{"latents.npy", f16_latent()},
                                          {"clip.npy", f32_feature(2, 3, -1.0f)},
                                          {"pooled.npy", f32_feature(1, 3)}},
                                         true)});
    entries.push_back({"002.caption.txt", t::bytes_of("zwei Würfel")});
    auto shard = data::webdataset_to_shard(t::tar(entries));
    REQUIRE_MESSAGE(shard.ok(), shard.message());
    CHECK(shard->samples == 3);
    CHECK(shard->caption_tokens == 3 + 3 + 2);
    CHECK(shard->skipped_files == 2);
    CHECK(shard->skipped_extensions == std::vector<std::string>{"jpg", "npz:pooled.npy"});
    auto loaded = load_shard(shard->safetensors);
    REQUIRE_MESSAGE(loaded.ok(), loaded.message());
    CHECK(loaded->labels.equal(torch::tensor({0, 7, 0}, torch::kInt64)));
    CHECK(loaded->text_len.equal(torch::tensor({3, 3, 2}, torch::kInt64)));
    auto padded = loaded->padded_captions().text;
    CHECK(padded.sizes() == torch::IntArrayRef{3, 3, 3});
    CHECK(padded[2][0][0].item<float>() == -1.0f);
    CHECK(padded[2][2].abs().sum().item<float>() == 0.0f);
    CHECK(loaded->inputs.eq(1.0).all().item<bool>());
    auto texts = read_caption_texts(shard->safetensors, 3).value();
    CHECK(texts == std::vector<std::string>{"a caption of 000", "a caption of 001", "zwei Würfel"});
    auto file = parse_safetensors(shard->safetensors).value();
    CHECK(file.find("text_tokens")->dtype == DType::F16);
    CHECK(file.find("latents")->dtype == DType::F16);
    // No captions at all: latents and labels only.
    auto plain = data::webdataset_to_shard(t::tar({{"a.latent.npy", f16_latent()}, {"a.cls", t::bytes_of("2")}}));
    REQUIRE(plain.ok());
    CHECK(parse_safetensors(plain->safetensors).value().find("text_tokens") == nullptr);
}

TEST_CASE("bad webdataset files are refused with a named error") {
    auto with = [](std::vector<t::TarEntry> entries, const std::string& name, FileBytes bytes) {
        for (auto& e : entries)
            if (e.name == name) e.data = std::move(bytes);
        return entries;
    };
    auto good = join(sample("a"), sample("b"));
    REQUIRE(wds_error(good).empty());
    // wrong dtypes
    CHECK(has(
        wds_error(with(good, "a.latent.npy", t::npy<std::int32_t>("<i4", {4, 2, 2}, std::vector<std::int32_t>(16)))),
        "dtype int32 where float16 or float32"));
    CHECK(has(wds_error(with(good, "b.t5.npy", t::npy<double>("<f8", {5, 3}, std::vector<double>(15)))),
              "dtype float64"));
    CHECK(has(wds_error(with(good, "a.mask.npy", t::npy<float>("<f4", {5}, {1, 1, 1, 0, 0}))), "bool or integer"));
    CHECK(has(wds_error(with(good, "a.latent.npy", f16_latent({16}))), "[C, H, W]"));
    // masks
    CHECK(has(wds_error(with(good, "a.mask.npy", mask({1, 1, 1, 0, 0, 0, 0}))),
              "mask of 7 entries for 5 caption tokens"));
    CHECK(has(wds_error(with(good, "a.mask.npy", mask({1, 0, 1, 0, 0}))), "not ones followed by zeros"));
    CHECK(has(wds_error(with(good, "a.mask.npy", mask({0, 0, 0, 0, 0}))), "no ones"));
    CHECK(has(wds_error(with(good, "a.mask.npy", mask({1, 2, 0, 0, 0}))), "other than 0 and 1"));
    // non-finite values and f16 overflow
    CHECK(has(wds_error(with(good, "b.latent.npy", f16_latent({4, 2, 2}, kF16NaN))), "latent holds a non-finite"));
    CHECK(has(wds_error(with(good, "b.t5.npy", f32_feature(5, 3, std::numeric_limits<float>::quiet_NaN()))),
              "caption feature holds a non-finite"));
    CHECK(has(wds_error(with(good, "b.t5.npy", f32_feature(5, 3, 70000.0f))), "past float16's range"));
    // mismatched counts and shapes
    auto no_latent = good;
    std::erase_if(no_latent, [](const t::TarEntry& e) { return e.name == "b.latent.npy"; });
    CHECK(has(wds_error(no_latent), "sample \"b\" has no latent"));
    auto no_feature = good;
    std::erase_if(no_feature, [](const t::TarEntry& e) { return e.name == "b.t5.npy" || e.name == "b.mask.npy"; });
    CHECK(has(wds_error(no_feature), "sample \"b\" has no caption feature"));
    auto no_text = good;
    std::erase_if(no_text, [](const t::TarEntry& e) { return e.name == "b.txt"; });
    CHECK(has(wds_error(no_text), "no caption text"));
    CHECK(has(wds_error(with(good, "b.latent.npy", f16_latent({4, 4, 4}))), "latent is float16 [4, 4, 4]"));
    CHECK(has(wds_error(with(good, "b.t5.npy", f32_feature(5, 4))), "4 wide"));
    CHECK(has(wds_error(join(good, {{"a.clip.npy", f32_feature(5, 3)}})), "two of a kind"));
    CHECK(has(wds_error(join(good, {{"b.cls", t::bytes_of("-1")}})), "non-negative decimal label"));
    CHECK(has(wds_error(with(good, "a.txt", FileBytes{'a', 0xff, 'b'})), "not UTF-8"));
    CHECK(has(wds_error({{"readme.md", t::bytes_of("x")}}), "no samples"));
    // corrupt .npy header and a truncated tar
    auto corrupt = sample("a")[0].data;
    std::memcpy(corrupt.data() + 12, "dtype", 5);  // 'descr' → 'dtype'
    CHECK(has(wds_error(with(good, "a.latent.npy", corrupt)), "a.latent.npy: .npy header has an unknown key"));
    auto tar = t::tar(good);
    tar.resize(tar.size() - 1500);
    CHECK(has(data::webdataset_to_shard(tar).message(), "truncated tar"));
    data::WebDatasetLimits limits;
    limits.max_output_bytes = 100;
    CHECK(has(data::webdataset_to_shard(t::tar(good), limits).message(), "split the tar"));
}

TEST_CASE("import packs padded captions and keeps every other tensor as it was") {
    TempDir source, dir;
    torch::manual_seed(3);
    const std::int64_t n = 6, l = 40, d = 32;
    auto text = torch::randn({n, l, d});
    auto lengths = torch::tensor({5, 40, 1, 12, 7, 20}, torch::kInt64);
    auto mask = torch::arange(l).unsqueeze(0).lt(lengths.unsqueeze(1)).to(torch::kUInt8);
    auto latents = torch::randn({n, 4, 8, 8});
    auto captions = torch::zeros({n, 8}, torch::kUInt8);
    captions.index_put_({torch::indexing::Slice(), 0}, 'a');
    auto extra = torch::arange(n * 2, torch::kInt64).reshape({n, 2});
    auto write = [&](const std::string& name, const TorchTensorMap& tensors) {
        REQUIRE(write_file_atomic(source / name, to_safetensors(tensors, {{"origin", "test"}}).value()).ok());
        return source / name;
    };
    auto labels = torch::tensor({0, 1, 2, 3, 4, 5}, torch::kInt64);
    auto masked = write("masked.safetensors", {{"latents", latents},
                                               {"labels", labels},
                                               {"text_emb", text},
                                               {"text_mask", mask},
                                               {"captions", captions},
                                               {"slot_classes", extra}});
    auto bf16 = write("bf16.safetensors", {{"latents", latents.to(torch::kHalf)},
                                           {"labels", labels},
                                           {"text_emb", text.to(torch::kBFloat16)},
                                           {"text_len", lengths}});
    auto unmasked = write("all.safetensors", {{"latents", latents}, {"labels", labels}, {"text_emb", text}});

    data::ImportOptions options;
    options.out = dir.path();
    options.shards = {masked, bf16, unmasked};
    options.validation = masked;
    REQUIRE(data::import_shards(options).ok());
    auto manifest = load_dataset_manifest(dir / "dataset.json").value();
    REQUIRE(manifest.train.size() == 3);
    CHECK(manifest.text_dim == d);
    const std::vector<torch::Tensor> expected_len{lengths, lengths, torch::full({n}, l, torch::kInt64)};
    const std::vector<torch::Tensor> expected_text{text, text.to(torch::kBFloat16).to(torch::kFloat), text};
    for (std::size_t s = 0; s < 3; ++s) {
        auto raw = stored_raw(dir / manifest.train[s].file);
        auto names = tensor_names(raw);
        CHECK(std::find(names.begin(), names.end(), "text_tokens") != names.end());
        CHECK(std::find(names.begin(), names.end(), "text_emb") == names.end());
        CHECK(std::find(names.begin(), names.end(), "text_mask") == names.end());
        auto loaded = load_shard(raw).value();
        CHECK(loaded.text_len.equal(expected_len[s]));
        CHECK((loaded.text_tokens.scalar_type() == torch::kHalf));  // held as stored, not widened
        auto padded = loaded.padded_captions().text.to(torch::kFloat);
        for (std::int64_t i = 0; i < n; ++i) {
            auto k = expected_len[s][i].item<std::int64_t>();
            auto want = expected_text[s][i].slice(0, 0, k).to(torch::kHalf).to(torch::kFloat);
            CHECK(padded[i].slice(0, 0, k).equal(want));
        }
    }
    // Everything but the captions is copied byte for byte, metadata included.
    auto before = read_file(masked, kMaxShardBytes).value();
    auto after = stored_raw(dir / manifest.train[0].file);
    auto original = parse_safetensors(before).value(), packed = parse_safetensors(after).value();
    for (const char* name : {"latents", "labels", "captions", "slot_classes"}) {
        auto a = original.find(name)->data, b = packed.find(name)->data;
        CHECK_MESSAGE(std::equal(a.begin(), a.end(), b.begin(), b.end()), name);
    }
    CHECK(packed.metadata().at("origin") == "test");
    // Packed f16 (mean length 14 of 40) against padded f32: the captions shrink about 5.7-fold,
    // the whole shard (latents unchanged) about 3-fold.
    CHECK(after.size() * 2 < before.size());
    CHECK(manifest.validation.samples == n);
    auto short_rows = write("rows.safetensors", {{"latents", latents}, {"labels", labels}, {"text_emb", text},
                                                 {"captions", captions.slice(0, 0, n - 1)}});
    options.shards = {short_rows};
    CHECK(has(data::import_shards(options).message(), "\"captions\" has 5 rows for 6 samples"));
}

TEST_CASE("import reads webdataset tars and leaves nothing behind on a bad one") {
    TempDir source, dir;
    auto train = join(join(sample("000"), sample("001")), sample("002"));
    train.push_back({"002.cls", t::bytes_of("4")});
    REQUIRE(write_file_atomic(source / "train.tar", t::tar(train)).ok());
    REQUIRE(write_file_atomic(source / "val.tar", t::tar(sample("v"))).ok());
    data::ImportOptions options;
    options.out = dir.path();
    options.shards = {source / "train.tar"};
    options.validation = source / "val.tar";
    REQUIRE(data::import_shards(options).ok());
    auto manifest = load_dataset_manifest(dir / "dataset.json").value();
    CHECK(manifest.sample_shape == std::vector<std::int64_t>{4, 2, 2});
    CHECK(manifest.text_dim == 3);
    CHECK(manifest.classes.size() == 5);
    auto stored = read_file(dir / manifest.train[0].file, kMaxShardBytes).value();
    auto loaded = load_shard(stored).value();
    CHECK(loaded.labels.equal(torch::tensor({0, 0, 4}, torch::kInt64)));
    CHECK(loaded.text_len.equal(torch::tensor({3, 3, 3}, torch::kInt64)));
    CHECK(loaded.padded_captions().text.eq(0.5).all().item<bool>());
    CHECK(loaded.inputs.eq(1.0).all().item<bool>());
    CHECK(read_caption_texts(stored, 3).value()[2] == "a caption of 002");

    std::ostringstream out;
    REQUIRE(data::inspect_tensor_file(dir / manifest.train[0].file, out).ok());
    CHECK(has(out.str(), "per sample: "));
    CHECK(has(out.str(), "bytes (captions "));
    CHECK(has(out.str(), "compressed "));

    // A bad second tar: the good first one is not imported either, nothing is written.
    auto listing = directory_listing(dir.path());
    auto bad = sample("x");
    bad[2].data = mask({1, 1, 1, 1, 1, 1});
    REQUIRE(write_file_atomic(source / "bad.tar", t::tar(bad)).ok());
    auto more = join(sample("100"), sample("101"));
    REQUIRE(write_file_atomic(source / "more.tar", t::tar(more)).ok());
    options.validation.clear();
    options.shards = {source / "more.tar", source / "bad.tar"};
    auto status = data::import_shards(options);
    CHECK(has(status.message(), "bad.tar: x.mask.npy: mask of 6 entries for 5 caption tokens"));
    CHECK(directory_listing(dir.path()) == listing);
    CHECK(load_dataset_manifest(dir / "dataset.json").value().train.size() == 1);
    REQUIRE(write_file_atomic(source / "wide.tar",
                              t::tar({{"w.latent.npy", f16_latent()}, {"w.t5.npy", f32_feature(2, 8)}}))
                .ok());
    options.shards = {source / "more.tar", source / "wide.tar"};
    CHECK(has(data::import_shards(options).message(), "does not match"));
    CHECK(directory_listing(dir.path()) == listing);
    options.shards = {source / "x.tar.gz"};
    REQUIRE(write_file_atomic(source / "x.tar.gz", t::bytes_of("not read")).ok());
    CHECK(has(data::import_shards(options).message(), "decompress the tar first"));
}

TEST_CASE("T5-XXL-width captions: bytes per sample padded against packed") {
    // Four captions of 12, 40, 77 and 25 tokens at T5-XXL's width, padded to 300 in f32 as
    // a tokenizer with padding="max_length" and an fp32 encoder leave them.
    TempDir source, dir;
    const std::int64_t n = 4, l = 300, d = 4096;
    auto lengths = torch::tensor({12, 40, 77, 25}, torch::kInt64);
    auto text = torch::randn({n, l, d}) * 0.2;
    auto shard = to_safetensors({{"latents", torch::randn({n, 4, 32, 32}).to(torch::kHalf)},
                                 {"labels", torch::zeros({n}, torch::kInt64)},
                                 {"text_emb", text},
                                 {"text_len", lengths}})
                     .value();
    REQUIRE(write_file_atomic(source / "t5.safetensors", shard).ok());
    data::ImportOptions options;
    options.out = dir.path();
    options.shards = {source / "t5.safetensors"};
    options.validation = source / "t5.safetensors";
    REQUIRE(data::import_shards(options).ok());
    auto manifest = load_dataset_manifest(dir / "dataset.json").value();
    auto packed = stored_raw(dir / manifest.train[0].file);
    auto before = shard.size() / n, after = packed.size() / n;
    auto stored = static_cast<std::uint64_t>(manifest.train[0].bytes) / n;
    MESSAGE("T5-XXL width, 300 tokens padded f32: " << before << " bytes per sample; packed f16 (mean 38.5 tokens): "
                                                    << after << "; stored zstd: " << stored);
    // 300 × 4096 × 4 + 8 KB latent, against 38.5 × 4096 × 2 + 8 KB.
    CHECK(before > 4'900'000);
    CHECK(after < 330'000);
    CHECK(after > 315'000);
}

TEST_CASE("files written by Python's tarfile, numpy and a hand-written safetensors writer import") {
    std::string python;
    for (std::string candidate :
         {std::string(std::getenv("TESSERA_PYTHON_TORCH") ? std::getenv("TESSERA_PYTHON_TORCH") : ""),
          std::string("/usr/bin/python3"), std::string("python3")})
        if (!candidate.empty() && run(candidate + " -c 'import numpy'").status == 0) {
            python = candidate;
            break;
        }
    if (python.empty()) {
        MESSAGE("skipped: no python3 with numpy (Debian's python3-numpy)");
        return;
    }
    TempDir work;
    {
        std::ofstream script(work / "write.py");
        script << R"PY(
import io, json, struct, sys, tarfile
import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(7)

def add(tf, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 1700000000.5  # a float: tarfile writes a pax header for it
    tf.addfile(info, io.BytesIO(data))

def npy(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()

def write_tar(path, count, first):
    tokens, lengths, labels, texts = [], [], [], []
    with tarfile.open(path, "w") as tf:
        for i in range(count):
            key = "shard/%06d" % (first + i)
            latent = rng.standard_normal((4, 8, 8)).astype(np.float16)
            length = 2 + i
            feature = rng.standard_normal((10, 24)).astype(np.float32)
            mask = (np.arange(10) < length).astype(bool)
            if i % 2 == 0:
                add(tf, key + ".latent.npy", npy(latent))
                add(tf, key + ".t5.npy", npy(feature))
                add(tf, key + ".attention_mask.npy", npy(mask))
            else:
                buffer = io.BytesIO()
                (np.savez_compressed if i % 4 == 1 else np.savez)(buffer, latent=latent, t5=feature, mask=mask)
                add(tf, key + ".npz", buffer.getvalue())
            add(tf, key + ".txt", ("a photo number %d, café" % i).encode())
            add(tf, key + ".cls", str(i % 3).encode())
            add(tf, key + ".json", b"{}")
            tokens.append(feature[:length].astype(np.float16))
            lengths.append(length)
            labels.append(i % 3)
            texts.append("a photo number %d, café" % i)
    return np.concatenate(tokens), lengths, labels, texts

def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, (dtype, array) in tensors.items():
        data = array.tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))

tokens, lengths, labels, texts = write_tar(out + "/train.tar", 6, 0)
tokens.tofile(out + "/train.tokens")
write_tar(out + "/val.tar", 2, 100)
n, length = 5, 16
emb = rng.standard_normal((n, length, 24)).astype(np.float32)
lens = np.array([3, 16, 1, 9, 4], np.int64)
mask = (np.arange(length)[None, :] < lens[:, None]).astype(np.int64)
captions = np.zeros((n, 12), np.uint8)
write_safetensors(out + "/padded.safetensors", {
    "latents": ("F32", rng.standard_normal((n, 4, 8, 8)).astype(np.float32)),
    "labels": ("I64", np.arange(n, dtype=np.int64) % 3),
    "text_emb": ("F32", emb),
    "text_mask": ("I64", mask),
    "captions": ("U8", captions),
})
np.concatenate([emb[i, :lens[i]] for i in range(n)]).astype(np.float16).tofile(out + "/padded.tokens")
)PY";
    }
    auto wrote = run(python + " " + (work / "write.py").string() + " " + work.path().string());
    REQUIRE_MESSAGE(wrote.status == 0, wrote.output);
    auto tool = std::getenv("TESSERA_DATA");
    REQUIRE_MESSAGE(tool != nullptr, "TESSERA_DATA: the tessera-data binary");
    auto dir = work / "dataset";
    auto imported =
        run(std::string(tool) + " import --out " + dir.string() + " --validation " + (work / "val.tar").string() + " " +
            (work / "train.tar").string() + " " + (work / "padded.safetensors").string());
    REQUIRE_MESSAGE(imported.status == 0, imported.output);
    CHECK(has(imported.output, "train.tar: 6 samples; "));
    CHECK(has(imported.output, "skipped 6 files of other kinds (json)"));
    CHECK(has(imported.output, "padded.safetensors: 5 samples; "));
    auto manifest = load_dataset_manifest(dir / "dataset.json").value();
    REQUIRE(manifest.train.size() == 2);
    CHECK(manifest.text_dim == 24);

    auto expect_tokens = [&](const std::string& name, const Bytes& raw) {
        auto want = read_file(work / name, kMaxShardBytes).value();
        auto got = parse_safetensors(raw).value().find("text_tokens")->data;
        CHECK_MESSAGE(std::equal(want.begin(), want.end(), got.begin(), got.end()), name);
    };
    auto train = stored_raw(dir / manifest.train[0].file);
    expect_tokens("train.tokens", train);
    auto loaded = load_shard(train).value();
    CHECK(loaded.text_len.equal(torch::tensor({2, 3, 4, 5, 6, 7}, torch::kInt64)));
    CHECK(loaded.labels.equal(torch::tensor({0, 1, 2, 0, 1, 2}, torch::kInt64)));
    CHECK(read_caption_texts(train, 6).value()[5] == "a photo number 5, café");
    auto padded = stored_raw(dir / manifest.train[1].file);
    expect_tokens("padded.tokens", padded);
    CHECK(load_shard(padded).value().text_len.equal(torch::tensor({3, 16, 1, 9, 4}, torch::kInt64)));
    CHECK(padded.size() < std::filesystem::file_size(work / "padded.safetensors"));
}
