// zstd compression: one-shot and streaming, with a hard cap on decompressed size so that a
// decompression bomb is an error rather than an allocation.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>

#include "bytes.h"
#include "result.h"

namespace tessera::common {

constexpr int kDefaultZstdLevel = 3;

// Receives output as it is produced; an error stops the stream.
using ByteSink = std::function<Status(ByteView)>;

// True when `bytes` starts with the zstd frame magic number.
bool is_zstd_frame(ByteView bytes);

// Compresses into one frame with a content checksum, so corruption is detected on decode.
Result<Bytes> zstd_compress(ByteView input, int level = kDefaultZstdLevel);
// Decodes one or more whole frames; output past `max_output_bytes` is an error.
Result<Bytes> zstd_decompress(ByteView input, std::uint64_t max_output_bytes);

// Streaming compressor for blobs too large to hold twice. Not thread-safe.
class ZstdCompressStream {
public:
    explicit ZstdCompressStream(int level = kDefaultZstdLevel);
    ~ZstdCompressStream();
    Status write(ByteView input, const ByteSink& sink);
    Status finish(const ByteSink& sink);

private:
    struct State;
    std::unique_ptr<State> state_;
};

// Streaming decompressor with the same cap as zstd_decompress. Not thread-safe.
class ZstdDecompressStream {
public:
    explicit ZstdDecompressStream(std::uint64_t max_output_bytes);
    ~ZstdDecompressStream();
    Status write(ByteView input, const ByteSink& sink);
    // Fails when the input ended inside a frame or held no frame at all.
    Status finish();

private:
    struct State;
    std::unique_ptr<State> state_;
};

// File-to-file forms; the output appears atomically and only when complete.
Status zstd_compress_file(const std::filesystem::path& in, const std::filesystem::path& out,
                          int level = kDefaultZstdLevel);
Status zstd_decompress_file(const std::filesystem::path& in, const std::filesystem::path& out,
                            std::uint64_t max_output_bytes);

}  // namespace tessera::common
