// zstd streaming codecs over libzstd's ZSTD_CStream / ZSTD_DStream.
#include "zstd_codec.h"

#include <zstd.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "file_io.h"

namespace tessera::common {
namespace {

Error zstd_error(const char* what, std::size_t code) {
    return make_error(std::string(what) + ": " + ZSTD_getErrorName(code));
}

Status append_to(Bytes& out, ByteView chunk) {
    out.insert(out.end(), chunk.begin(), chunk.end());
    return {};
}

// Feeds a file to `consume` in 1 MiB pieces.
Status for_each_chunk(const std::filesystem::path& path, const ByteSink& consume) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error("cannot open " + path.string());
    std::vector<char> buffer(1 << 20);
    while (in) {
        in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
        auto got = static_cast<std::size_t>(in.gcount());
        if (got == 0) break;
        if (auto status = consume(as_bytes(std::string_view(buffer.data(), got))); !status) return status;
    }
    if (in.bad()) return make_error("read error on " + path.string());
    return {};
}

}  // namespace

struct ZstdCompressStream::State {
    ZSTD_CCtx* ctx = ZSTD_createCCtx();
    std::vector<std::uint8_t> out = std::vector<std::uint8_t>(ZSTD_CStreamOutSize());
    ~State() { ZSTD_freeCCtx(ctx); }

    Status drive(ByteView input, ZSTD_EndDirective mode, const ByteSink& sink) {
        ZSTD_inBuffer in{input.data(), input.size(), 0};
        for (;;) {
            ZSTD_outBuffer o{out.data(), out.size(), 0};
            std::size_t remaining = ZSTD_compressStream2(ctx, &o, &in, mode);
            if (ZSTD_isError(remaining)) return zstd_error("zstd compression failed", remaining);
            if (o.pos > 0)
                if (auto status = sink(ByteView(out.data(), o.pos)); !status) return status;
            bool done = mode == ZSTD_e_continue ? in.pos == in.size : remaining == 0;
            if (done) return {};
        }
    }
};

ZstdCompressStream::ZstdCompressStream(int level) : state_(std::make_unique<State>()) {
    if (state_->ctx == nullptr) throw std::bad_alloc();
    ZSTD_CCtx_setParameter(state_->ctx, ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(state_->ctx, ZSTD_c_checksumFlag, 1);
}
ZstdCompressStream::~ZstdCompressStream() = default;

Status ZstdCompressStream::write(ByteView input, const ByteSink& sink) {
    return state_->drive(input, ZSTD_e_continue, sink);
}

Status ZstdCompressStream::finish(const ByteSink& sink) { return state_->drive({}, ZSTD_e_end, sink); }

struct ZstdDecompressStream::State {
    ZSTD_DCtx* ctx = ZSTD_createDCtx();
    std::vector<std::uint8_t> out = std::vector<std::uint8_t>(ZSTD_DStreamOutSize());
    std::uint64_t max_output = 0;
    std::uint64_t produced = 0;
    bool saw_input = false;
    bool frame_open = false;
    ~State() { ZSTD_freeDCtx(ctx); }
};

ZstdDecompressStream::ZstdDecompressStream(std::uint64_t max_output_bytes) : state_(std::make_unique<State>()) {
    if (state_->ctx == nullptr) throw std::bad_alloc();
    state_->max_output = max_output_bytes;
}
ZstdDecompressStream::~ZstdDecompressStream() = default;

Status ZstdDecompressStream::write(ByteView input, const ByteSink& sink) {
    auto& s = *state_;
    ZSTD_inBuffer in{input.data(), input.size(), 0};
    if (!input.empty()) s.saw_input = true;
    // A full output buffer may mean zstd holds more back: call again until it does not.
    bool output_full = false;
    while (in.pos < in.size || output_full) {
        ZSTD_outBuffer o{s.out.data(), s.out.size(), 0};
        std::size_t hint = ZSTD_decompressStream(s.ctx, &o, &in);
        if (ZSTD_isError(hint)) return zstd_error("zstd data is corrupt", hint);
        s.frame_open = hint != 0;
        s.produced += o.pos;
        if (s.produced > s.max_output)
            return make_error("zstd data decompresses to more than the limit of " + std::to_string(s.max_output) +
                              " bytes");
        if (o.pos > 0)
            if (auto status = sink(ByteView(s.out.data(), o.pos)); !status) return status;
        // A finished frame has nothing held back; asking again would start a new frame.
        output_full = o.pos == o.size && s.frame_open;
    }
    return {};
}

Status ZstdDecompressStream::finish() {
    if (!state_->saw_input) return make_error("zstd input is empty");
    if (state_->frame_open) return make_error("zstd data is truncated");
    return {};
}

bool is_zstd_frame(ByteView bytes) {
    constexpr std::uint8_t kMagic[4] = {0x28, 0xb5, 0x2f, 0xfd};  // ZSTD_MAGICNUMBER, little-endian
    return bytes.size() >= 4 && std::equal(std::begin(kMagic), std::end(kMagic), bytes.begin());
}

Result<Bytes> zstd_compress(ByteView input, int level) {
    Bytes out;
    out.reserve(ZSTD_compressBound(input.size()));
    ZstdCompressStream stream(level);
    auto sink = [&out](ByteView chunk) { return append_to(out, chunk); };
    if (auto status = stream.write(input, sink); !status) return status.error();
    if (auto status = stream.finish(sink); !status) return status.error();
    return out;
}

Result<Bytes> zstd_decompress(ByteView input, std::uint64_t max_output_bytes) {
    Bytes out;
    ZstdDecompressStream stream(max_output_bytes);
    auto status = stream.write(input, [&out](ByteView chunk) { return append_to(out, chunk); });
    if (!status) return status.error();
    if (auto finished = stream.finish(); !finished) return finished.error();
    return out;
}

Status zstd_compress_file(const std::filesystem::path& in, const std::filesystem::path& out, int level) {
    auto writer = AtomicFileWriter::create(out);
    if (!writer) return writer.error();
    ZstdCompressStream stream(level);
    auto sink = [&writer](ByteView chunk) { return writer->append(chunk); };
    auto fed = for_each_chunk(in, [&](ByteView chunk) { return stream.write(chunk, sink); });
    if (!fed) return fed;
    if (auto status = stream.finish(sink); !status) return status;
    return writer->commit();
}

Status zstd_decompress_file(const std::filesystem::path& in, const std::filesystem::path& out,
                            std::uint64_t max_output_bytes) {
    auto writer = AtomicFileWriter::create(out);
    if (!writer) return writer.error();
    ZstdDecompressStream stream(max_output_bytes);
    auto sink = [&writer](ByteView chunk) { return writer->append(chunk); };
    auto fed = for_each_chunk(in, [&](ByteView chunk) { return stream.write(chunk, sink); });
    if (!fed) return with_context(in.string(), fed.error());
    if (auto status = stream.finish(); !status) return with_context(in.string(), status.error());
    return writer->commit();
}

}  // namespace tessera::common
