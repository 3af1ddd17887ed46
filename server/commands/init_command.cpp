// `tessera-server init`: a new state directory with its database, Ed25519 key and operator token.
#include <cxxopts.hpp>

#include "command_line.h"
#include "command_support.h"
#include "ed25519.h"
#include "task_setup.h"

namespace tessera::server {

int init_command(int argc, char** argv) {
    cxxopts::Options options("tessera-server init", "Create a server state directory");
    options.add_options()("state", "state directory (created)", cxxopts::value<std::string>());
    add_database_option(options);
    auto parsed = common::parse_command_line(options, argc, argv);
    if (!parsed) return parsed.exit_code;
    const auto& args = *parsed;
    if (!args.count("state")) return fail("init", "needs --state DIR");
    StateDir state = state_dir_of(args);
    auto token = initialize_state(state);
    if (!token) return fail("init", token.message());
    auto key = common::SigningKey::load_pem(state.signing_key());
    std::cout << "initialised " << state.root().string() << "\n"
              << "server key id: " << (key ? key->verify_key().key_id() : std::string("?")) << "\n"
              << "operator token: in " << state.operator_token().string() << " (mode 0600)\n";
    return 0;
}

}  // namespace tessera::server
