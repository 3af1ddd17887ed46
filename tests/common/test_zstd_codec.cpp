// zstd: round trips (one-shot, streaming, files), the output cap, and corrupt input.
#include <doctest/doctest.h>

#include <fstream>
#include <random>

#include "corrupt.h"
#include "file_io.h"
#include "temp_dir.h"
#include "zstd_codec.h"

using namespace tessera::common;

namespace {

Bytes sample_bytes(std::size_t size) {
    Bytes bytes(size);
    std::mt19937 rng(7);
    for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::uint8_t>(rng() % 16 + i % 7);
    return bytes;
}

}  // namespace

TEST_CASE("one-shot round trip") {
    for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{3} << 20}) {
        auto input = sample_bytes(size);
        auto packed = zstd_compress(input);
        REQUIRE(packed.ok());
        auto unpacked = zstd_decompress(*packed, size);
        REQUIRE(unpacked.ok());
        CHECK(*unpacked == input);
    }
}

TEST_CASE("streaming output in pieces decodes to the input") {
    auto input = sample_bytes(5 << 20);
    Bytes packed;
    ZstdCompressStream compressor;
    auto sink = [&](ByteView chunk) {
        packed.insert(packed.end(), chunk.begin(), chunk.end());
        return Status{};
    };
    for (std::size_t at = 0; at < input.size(); at += 100000)
        REQUIRE(
            compressor.write(ByteView(input).subspan(at, std::min<std::size_t>(100000, input.size() - at)), sink).ok());
    REQUIRE(compressor.finish(sink).ok());

    Bytes output;
    ZstdDecompressStream decompressor(input.size());
    for (std::size_t at = 0; at < packed.size(); at += 777) {
        auto piece = ByteView(packed).subspan(at, std::min<std::size_t>(777, packed.size() - at));
        REQUIRE(decompressor
                    .write(piece,
                           [&](ByteView chunk) {
                               output.insert(output.end(), chunk.begin(), chunk.end());
                               return Status{};
                           })
                    .ok());
    }
    CHECK(decompressor.finish().ok());
    CHECK(output == input);
}

TEST_CASE("a decompression bomb is an error, not an allocation") {
    Bytes zeros(64 << 20, 0);
    auto packed = zstd_compress(zeros, 19);
    REQUIRE(packed.ok());
    CHECK(packed->size() < 64 * 1024);
    auto capped = zstd_decompress(*packed, 1 << 20);
    CHECK_FALSE(capped.ok());
    CHECK(capped.message().find("limit") != std::string::npos);

    // The streaming form stops at the cap too, having handed out no more than the cap.
    std::size_t delivered = 0;
    ZstdDecompressStream stream(1 << 20);
    auto status = stream.write(*packed, [&](ByteView chunk) {
        delivered += chunk.size();
        return Status{};
    });
    CHECK_FALSE(status.ok());
    CHECK(delivered <= (1u << 20));
}

TEST_CASE("every truncation of a frame is an error") {
    auto packed = zstd_compress(sample_bytes(3000));
    REQUIRE(packed.ok());
    tessera::testing::for_each_truncation(
        *packed, [](const Bytes& damaged) { CHECK_FALSE(zstd_decompress(damaged, 1 << 20).ok()); });
}

TEST_CASE("a flipped byte is detected or harmless, never a crash or silent change") {
    auto input = sample_bytes(3000);
    auto packed = zstd_compress(input);
    REQUIRE(packed.ok());
    int detected = 0;
    tessera::testing::for_each_flip(*packed, 0x5a, [&](const Bytes& damaged, std::size_t at) {
        auto result = zstd_decompress(damaged, 1 << 20);
        INFO("flipped byte " << at);
        if (result.ok())
            CHECK(*result == input);
        else
            ++detected;
    });
    CHECK(detected > static_cast<int>(packed->size()) * 9 / 10);
}

TEST_CASE("garbage and trailing garbage are errors") {
    CHECK_FALSE(zstd_decompress(to_bytes("definitely not zstd"), 1 << 20).ok());
    CHECK_FALSE(zstd_decompress(Bytes{}, 1 << 20).ok());
    auto packed = zstd_compress(sample_bytes(100));
    REQUIRE(packed.ok());
    auto with_tail = *packed;
    with_tail.push_back(0x42);
    CHECK_FALSE(zstd_decompress(with_tail, 1 << 20).ok());
}

TEST_CASE("file to file round trip, and a corrupt file leaves no output") {
    tessera::testing::TempDir dir;
    auto input = sample_bytes(2 << 20);
    REQUIRE(write_file_atomic(dir / "in", input).ok());
    REQUIRE(zstd_compress_file(dir / "in", dir / "in.zst").ok());
    REQUIRE(zstd_decompress_file(dir / "in.zst", dir / "out", input.size()).ok());
    CHECK(*read_file(dir / "out", 4 << 20) == input);

    auto packed = *read_file(dir / "in.zst", 4 << 20);
    packed.resize(packed.size() / 2);
    REQUIRE(write_file_atomic(dir / "half.zst", packed).ok());
    auto status = zstd_decompress_file(dir / "half.zst", dir / "half", input.size());
    CHECK_FALSE(status.ok());
    CHECK_FALSE(std::filesystem::exists(dir / "half"));
}
