// `tessera-server init`: a new state directory with its database, Ed25519 key and operator token.
#include <cxxopts.hpp>
#include <openssl/rand.h>

#include <sys/stat.h>

#include "command_support.h"
#include "ed25519.h"
#include "file_io.h"
#include "sha256.h"
#include "text_encoding.h"

namespace tessera::server {

int init_command(int argc, char** argv) {
    cxxopts::Options options("tessera-server init", "Create a server state directory");
    options.add_options()
        ("state", "state directory (created)", cxxopts::value<std::string>())
        ("h,help", "show this help");
    auto args = options.parse(argc, argv);
    if (args.count("help")) {
        std::cout << options.help() << "\n";
        return 0;
    }
    if (!args.count("state")) return fail("init", "needs --state DIR");
    StateDir state(args["state"].as<std::string>());
    if (std::filesystem::exists(state.database()))
        return fail("init", state.root().string() + " is initialised already");
    std::error_code error;
    std::filesystem::create_directories(state.blobs(), error);
    if (!error) std::filesystem::create_directories(state.results(), error);
    if (error) return fail("init", "cannot create " + state.root().string() + ": " + error.message());
    ::chmod(state.root().c_str(), 0700);

    auto key = common::SigningKey::generate();
    if (auto status = key.save_pem(state.signing_key()); !status) return fail("init", status.message());
    common::Bytes token_bytes(32);
    if (RAND_bytes(token_bytes.data(), static_cast<int>(token_bytes.size())) != 1)
        return fail("init", "the system random generator failed");
    auto token = common::to_hex(token_bytes);
    if (auto status = common::write_file_atomic(state.operator_token(), common::as_bytes(token + "\n"), 0600); !status)
        return fail("init", status.message());
    // The database comes last: its presence marks a complete state directory.
    auto store = Store::open(state.database(), true);
    if (!store) return fail("init", store.message());
    if (auto status = (*store)->set_setting("operator_token_sha256", common::sha256_hex(common::as_bytes(token))); !status)
        return fail("init", status.message());
    if (auto status = (*store)->set_setting("server_key_id", key.verify_key().key_id()); !status)
        return fail("init", status.message());
    std::cout << "initialised " << state.root().string() << "\n"
              << "server key id: " << key.verify_key().key_id() << "\n"
              << "operator token: in " << state.operator_token().string() << " (mode 0600)\n";
    return 0;
}

}  // namespace tessera::server
