// Capped reads, atomic writes and memory maps.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <fstream>

#include "file_io.h"
#include "mapped_file.h"
#include "temp_dir.h"

using namespace tessera::common;

TEST_CASE("atomic write replaces content and leaves no temp files") {
    tessera::testing::TempDir dir;
    auto path = dir / "state.json";
    REQUIRE(write_file_atomic(path, as_bytes("first")).ok());
    REQUIRE(write_file_atomic(path, as_bytes("second")).ok());
    CHECK(as_string_view(*read_file(path, 100)) == "second");
    int entries = 0;
    for ([[maybe_unused]] auto& entry : std::filesystem::directory_iterator(dir.path())) ++entries;
    CHECK(entries == 1);
}

TEST_CASE("atomic write honours the requested mode") {
    tessera::testing::TempDir dir;
    auto path = dir / "secret";
    REQUIRE(write_file_atomic(path, as_bytes("key"), 0600).ok());
    struct stat info {};
    REQUIRE(::stat(path.c_str(), &info) == 0);
    CHECK((info.st_mode & 0777) == 0600);
}

TEST_CASE("a writer dropped before commit leaves the old file and no temp file") {
    tessera::testing::TempDir dir;
    auto path = dir / "model";
    REQUIRE(write_file_atomic(path, as_bytes("old")).ok());
    {
        auto writer = AtomicFileWriter::create(path);
        REQUIRE(writer.ok());
        REQUIRE(writer->append(as_bytes("half-written")).ok());
    }
    CHECK(as_string_view(*read_file(path, 100)) == "old");
    int entries = 0;
    for ([[maybe_unused]] auto& entry : std::filesystem::directory_iterator(dir.path())) ++entries;
    CHECK(entries == 1);
}

TEST_CASE("atomic write into a missing directory fails cleanly") {
    tessera::testing::TempDir dir;
    auto status = write_file_atomic(dir / "no" / "such" / "file", as_bytes("x"));
    CHECK_FALSE(status.ok());
    CHECK(status.message().find("cannot create") != std::string::npos);
}

TEST_CASE("read_file enforces its cap") {
    tessera::testing::TempDir dir;
    std::ofstream(dir / "big") << std::string(1000, 'a');
    CHECK(read_file(dir / "big", 1000).ok());
    auto capped = read_file(dir / "big", 999);
    CHECK_FALSE(capped.ok());
    CHECK(capped.message().find("limit") != std::string::npos);
    CHECK_FALSE(read_file(dir / "missing", 10).ok());
}

TEST_CASE("memory-mapped files expose their bytes, empty files too") {
    tessera::testing::TempDir dir;
    std::ofstream(dir / "data") << "mapped bytes";
    std::ofstream(dir / "empty");
    auto mapped = MappedFile::open(dir / "data");
    REQUIRE(mapped.ok());
    CHECK(as_string_view(mapped->bytes()) == "mapped bytes");
    auto moved = std::move(mapped).value();
    CHECK(as_string_view(moved.bytes()) == "mapped bytes");
    auto empty = MappedFile::open(dir / "empty");
    REQUIRE(empty.ok());
    CHECK(empty->bytes().empty());
    CHECK_FALSE(MappedFile::open(dir / "missing").ok());
}
