// SHA-256: FIPS 180 vectors, incremental hashing, files.
#include <doctest/doctest.h>

#include <fstream>

#include "sha256.h"
#include "temp_dir.h"

using namespace tessera::common;

TEST_CASE("known SHA-256 vectors") {
    CHECK(sha256_hex(as_bytes("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256_hex(as_bytes("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("incremental hashing equals one-shot, and the hasher resets after finish") {
    std::string text(100000, 'x');
    Sha256 hasher;
    hasher.update(as_bytes(std::string_view(text).substr(0, 333)));
    hasher.update(as_bytes(std::string_view(text).substr(333)));
    CHECK(hasher.finish() == sha256(as_bytes(text)));
    hasher.update(as_bytes("abc"));
    CHECK(hasher.finish() == sha256(as_bytes("abc")));
}

TEST_CASE("file hashing") {
    tessera::testing::TempDir dir;
    std::string text(3 << 20, 'q');
    std::ofstream(dir / "blob", std::ios::binary) << text;
    CHECK(*sha256_file_hex(dir / "blob") == sha256_hex(as_bytes(text)));
    CHECK_FALSE(sha256_file_hex(dir / "missing").ok());
}
