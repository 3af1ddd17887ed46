// Ed25519: sign/verify, PEM files and their mode, and interoperability with `openssl`.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "ed25519.h"
#include "file_io.h"
#include "temp_dir.h"

using namespace tessera::common;

namespace {

std::string openssl() {
    const char* path = std::getenv("TESSERA_OPENSSL");
    return path != nullptr ? path : "openssl";
}

int run(const std::string& command) {
    int status = std::system((command + " >/dev/null 2>&1").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Bytes read_all(const std::filesystem::path& path) { return *read_file(path, 1 << 20); }

}  // namespace

TEST_CASE("sign and verify; altered message, signature or key fail") {
    auto key = SigningKey::generate();
    auto message = as_bytes("work unit 42");
    auto signature = key.sign(message);
    CHECK(key.verify_key().verify(message, signature));
    CHECK_FALSE(key.verify_key().verify(as_bytes("work unit 43"), signature));
    auto bad = signature;
    bad[10] ^= 1;
    CHECK_FALSE(key.verify_key().verify(message, bad));
    CHECK_FALSE(key.verify_key().verify(message, ByteView(signature).first(63)));
    auto other = SigningKey::generate();
    CHECK_FALSE(other.verify_key().verify(message, signature));
    CHECK(key.verify_key().verify({}, key.sign({})));
}

TEST_CASE("key ids are 16 hex digits and differ between keys") {
    auto a = SigningKey::generate(), b = SigningKey::generate();
    CHECK(a.verify_key().key_id().size() == kKeyIdHexLength);
    CHECK(a.verify_key().key_id() != b.verify_key().key_id());
}

TEST_CASE("PEM save and load; private keys are created with mode 0600") {
    tessera::testing::TempDir dir;
    auto key = SigningKey::generate();
    REQUIRE(key.save_pem(dir / "key.pem").ok());
    REQUIRE(key.verify_key().save_pem(dir / "key.pub.pem").ok());
    struct stat info {};
    REQUIRE(::stat((dir / "key.pem").c_str(), &info) == 0);
    CHECK((info.st_mode & 0777) == 0600);

    auto loaded = SigningKey::load_pem(dir / "key.pem");
    REQUIRE(loaded.ok());
    CHECK(loaded->verify_key().raw() == key.verify_key().raw());
    auto message = as_bytes("hello");
    CHECK(key.verify_key().verify(message, loaded->sign(message)));
    auto loaded_public = VerifyKey::load_pem(dir / "key.pub.pem");
    REQUIRE(loaded_public.ok());
    CHECK(loaded_public->key_id() == key.verify_key().key_id());
}

TEST_CASE("malformed key files give clear errors") {
    tessera::testing::TempDir dir;
    REQUIRE(write_file_atomic(dir / "junk.pem", as_bytes("-----BEGIN PRIVATE KEY-----\nAAAA\n")).ok());
    auto junk = SigningKey::load_pem(dir / "junk.pem");
    CHECK_FALSE(junk.ok());
    CHECK(junk.message().find("junk.pem") != std::string::npos);
    CHECK_FALSE(SigningKey::load_pem(dir / "missing.pem").ok());
    CHECK_FALSE(VerifyKey::load_pem(dir / "junk.pem").ok());
    CHECK_FALSE(VerifyKey::from_raw(Bytes(31, 1)).ok());
}

TEST_CASE("keys of another algorithm are refused") {
    tessera::testing::TempDir dir;
    auto ec = dir / "ec.pem";
    REQUIRE(run(openssl() + " genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out " + ec.string()) == 0);
    auto loaded = SigningKey::load_pem(ec);
    CHECK_FALSE(loaded.ok());
    CHECK(loaded.message().find("not an Ed25519") != std::string::npos);
}

TEST_CASE("openssl verifies what tessera signs, and refuses a flipped byte") {
    tessera::testing::TempDir dir;
    auto key = SigningKey::generate();
    REQUIRE(key.verify_key().save_pem(dir / "pub.pem").ok());
    std::string message = "model version 7, delta sha256 abc";
    REQUIRE(write_file_atomic(dir / "msg", as_bytes(message)).ok());
    auto signature = key.sign(as_bytes(message));
    REQUIRE(write_file_atomic(dir / "sig", signature).ok());
    auto verify = openssl() + " pkeyutl -verify -pubin -inkey " + (dir / "pub.pem").string() + " -rawin -in " +
                  (dir / "msg").string() + " -sigfile " + (dir / "sig").string();
    CHECK(run(verify) == 0);

    signature[0] ^= 0x01;
    REQUIRE(write_file_atomic(dir / "sig", signature).ok());
    CHECK(run(verify) != 0);
}

TEST_CASE("tessera verifies what openssl signs, and refuses a flipped byte") {
    tessera::testing::TempDir dir;
    auto key_path = dir / "openssl-key.pem";
    REQUIRE(run(openssl() + " genpkey -algorithm ed25519 -out " + key_path.string()) == 0);
    REQUIRE(run(openssl() + " pkey -in " + key_path.string() + " -pubout -out " + (dir / "pub.pem").string()) == 0);
    std::string message = "signed by the openssl command-line tool";
    REQUIRE(write_file_atomic(dir / "msg", as_bytes(message)).ok());
    REQUIRE(run(openssl() + " pkeyutl -sign -inkey " + key_path.string() + " -rawin -in " + (dir / "msg").string() +
                " -out " + (dir / "sig").string()) == 0);

    auto public_key = VerifyKey::load_pem(dir / "pub.pem");
    REQUIRE(public_key.ok());
    auto signature = read_all(dir / "sig");
    CHECK(public_key->verify(as_bytes(message), signature));
    signature[5] ^= 0x80;
    CHECK_FALSE(public_key->verify(as_bytes(message), signature));

    // The private key openssl wrote loads too, and signs identically (Ed25519 is deterministic).
    auto private_key = SigningKey::load_pem(key_path);
    REQUIRE(private_key.ok());
    auto ours = private_key->sign(as_bytes(message));
    CHECK(Bytes(ours.begin(), ours.end()) == read_all(dir / "sig"));
}
