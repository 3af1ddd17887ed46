// The archive readers under `tessera-data import`: tar (ustar, GNU long names, pax), numpy's
// .npy headers and zip (.npz) members, each refusing damage with an error that names it.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "corrupt.h"
#include "npy_reader.h"
#include "tar_reader.h"
#include "webdataset_files.h"
#include "zip_reader.h"

using namespace tessera::common;
using tessera::testing::FileBytes;
namespace data = tessera::data;
namespace t = tessera::testing;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Recomputes a tar header block's checksum after a test edits a field.
void rechecksum(FileBytes& tar, std::size_t block) {
    std::memset(tar.data() + block + 148, ' ', 8);
    unsigned sum = 0;
    for (std::size_t i = 0; i < 512; ++i) sum += tar[block + i];
    std::snprintf(reinterpret_cast<char*>(tar.data() + block + 148), 8, "%06o", sum);
}

std::string tar_error(const FileBytes& bytes) {
    auto r = data::read_tar(bytes);
    return r ? "" : r.message();
}

std::string npy_error(const FileBytes& bytes) {
    auto r = data::parse_npy(bytes);
    return r ? "" : r.message();
}

}  // namespace

TEST_CASE("the tar reader reads ustar, GNU long names and pax paths, and refuses damage by name") {
    std::string long_key(130, 'k');
    auto archive =
        t::tar({{"./dir", {}, '5'},
                {"./dir/a.txt", t::bytes_of("hello")},
                {"dir/" + long_key + ".cls", t::bytes_of("4")},
                {"PaxHeaders/x",
                 t::bytes_of(t::pax_record("mtime", "1.5") + t::pax_record("path", "p/" + long_key + ".txt")), 'x'},
                {"ignored-short-name", t::bytes_of(std::string(513, 'z'))}});
    auto members = data::read_tar(archive);
    REQUIRE_MESSAGE(members.ok(), members.message());
    REQUIRE(members->size() == 3);
    CHECK((*members)[0].name == "dir/a.txt");
    CHECK(as_string_view((*members)[0].data) == "hello");
    CHECK((*members)[1].name == "dir/" + long_key + ".cls");
    CHECK((*members)[2].name == "p/" + long_key + ".txt");
    CHECK((*members)[2].data.size() == 513);
    CHECK(data::read_tar(t::tar({{"gnu.txt", t::bytes_of("x")}}, true)).ok());

    // Every proper prefix is a truncated archive, named as such.
    std::size_t refused = 0;
    t::for_each_truncation(t::tar({{"a.txt", t::bytes_of("hello")}}), [&](const FileBytes& cut) {
        auto message = tar_error(cut);
        refused += has(message, "truncated tar") ? 1 : 0;
    });
    CHECK(refused == t::tar({{"a.txt", t::bytes_of("hello")}}).size());

    auto one = t::tar({{"a.txt", t::bytes_of("hello")}});
    auto flipped = one;
    flipped[3] ^= 0x20;
    CHECK(has(tar_error(flipped), "checksum"));
    auto bad_size = one;
    bad_size[124 + 10] = '8';
    rechecksum(bad_size, 0);
    CHECK(has(tar_error(bad_size), "not an octal number"));
    auto big = one;
    std::memcpy(big.data() + 124, "77777777777", 11);
    rechecksum(big, 0);
    CHECK(has(tar_error(big), "truncated tar"));
    auto not_tar = one;
    std::memcpy(not_tar.data() + 257, "pkzip\0", 6);
    rechecksum(not_tar, 0);
    CHECK(has(tar_error(not_tar), "not a ustar or GNU tar"));

    CHECK(has(tar_error(t::tar({{"/etc/passwd.txt", t::bytes_of("x")}})), "absolute"));
    CHECK(has(tar_error(t::tar({{"a/../../b.txt", t::bytes_of("x")}})), "\"..\""));
    CHECK(has(tar_error(t::tar({{"link.txt", {}, '2'}})), "only regular files"));
    CHECK(has(tar_error(t::tar({{"dev", {}, '3'}})), "type '3'"));
    CHECK(has(tar_error(t::tar({{"x", t::bytes_of("12 path=a\n"), 'x'}, {"b.txt", {}}})), "pax record"));
    auto dangling = t::tar({{"x", t::bytes_of(t::pax_record("path", "a.txt")), 'x'}});
    CHECK(has(tar_error(dangling), "ends after an extended header"));
}

TEST_CASE("the npy reader parses numpy's headers strictly") {
    auto f32 = t::npy<float>("<f4", {2, 3}, {1, 2, 3, 4, 5, 6});
    auto parsed = data::parse_npy(f32);
    REQUIRE(parsed.ok());
    CHECK(parsed->type == data::NpyType::F32);
    CHECK(parsed->shape == std::vector<std::int64_t>{2, 3});
    CHECK(parsed->data.size() == 24);
    auto v2 = t::npy_raw("{'shape': (4,), 'descr': '|b1', 'fortran_order': False}", {1, 1, 0, 0}, 2);
    CHECK(data::parse_npy(v2).ok());
    CHECK(data::parse_npy(t::npy_raw("{'descr':'<f2','fortran_order':False,'shape':()}", {0, 0x3c}, 3)).ok());

    std::size_t refused = 0;
    t::for_each_truncation(f32, [&](const FileBytes& cut) { refused += npy_error(cut).empty() ? 0 : 1; });
    CHECK(refused == f32.size());
    auto header = [](const std::string& dict, std::size_t data_bytes = 4) {
        return npy_error(t::npy_raw(dict, FileBytes(data_bytes, 0)));
    };
    CHECK(has(header("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }"), "Fortran"));
    CHECK(has(header("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }"), "'>f4' is not supported"));
    CHECK(has(header("{'descr': '<U3', 'fortran_order': False, 'shape': (1,), }"), "not supported"));
    CHECK(has(header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }"), "structured"));
    CHECK(has(header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"), "need 8"));
    CHECK(has(header("{'descr': '<f4', 'fortran_order': False, 'shape': (1), }"), "'shape'"));
    CHECK(has(header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }"), "'shape'"));
    CHECK(has(header("{'descr': '<f4', 'shape': (1,), }"), "lacks"));
    CHECK(has(header("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}"), "repeats"));
    CHECK(has(header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}"), "unknown key"));
    CHECK(has(header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x"), "after its dict"));
    CHECK(
        has(header("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627777, 1099511627776), }"), "'shape'"));
    CHECK(has(header("{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576, 1048576, 16), }"),
              "need more"));
    auto version = f32;
    version[6] = 4;
    CHECK(has(npy_error(version), "version 4.0"));
    auto no_newline = f32;
    no_newline[f32.size() - 25] = ' ';
    CHECK(has(npy_error(no_newline), "newline"));
}

TEST_CASE("the zip reader inflates .npz members and checks their CRC") {
    auto array = t::npy<float>("<f4", {3}, {1, 2, 3});
    for (bool deflated : {false, true}) {
        auto archive = t::zip({{"latent.npy", array}, {"t5.npy", array}}, deflated);
        auto members = data::read_zip(archive);
        REQUIRE_MESSAGE(members.ok(), members.message());
        CHECK(members->size() == 2);
        CHECK((*members)[1].name == "t5.npy");
        CHECK((*members)[1].data == array);
        std::size_t refused = 0;
        t::for_each_truncation(archive, [&](const FileBytes& cut) { refused += data::read_zip(cut).ok() ? 0 : 1; });
        CHECK(refused == archive.size());
        auto corrupt = archive;
        corrupt[40 + 20] ^= 1;  // inside the first member's data
        CHECK_FALSE(data::read_zip(corrupt).ok());
    }
    auto stored = t::zip({{"a.npy", array}}, false);
    stored[30 + 5 + 12] ^= 1;
    CHECK(has(data::read_zip(stored).message(), "CRC-32"));
    data::ZipLimits small;
    small.max_total_bytes = array.size();
    CHECK(has(data::read_zip(t::zip({{"a.npy", array}, {"b.npy", array}}, true), small).message(), "more than"));
}
