// Test helper for tests/schemas: `proto_tool emit DIR` writes one example of each protocol
// message as the C++ code serialises it; `proto_tool parse TYPE FILE` runs the C++ parser
// on a file and exits 0 (accepted) or 1 (rejected, with the error on stderr).
#include <boost/json/serialize.hpp>

#include <filesystem>
#include <functional>
#include <iostream>
#include <map>

#include "../common/protocol_examples.h"
#include "file_io.h"
#include "server_info.h"

using namespace tessera::common;
using namespace tessera::testing;

namespace {

// A message parser as the accepted-or-why the tool reports.
template <class Parse>
std::function<Status(std::string_view)> status_of(Parse parse) {
    return [parse](std::string_view text) -> Status {
        auto parsed = parse(text);
        if (!parsed) return parsed.error();
        return {};
    };
}

template <class T>
std::function<Status(std::string_view)> parser() {
    return status_of(parse_message<T>);
}

const std::map<std::string, std::function<Status(std::string_view)>> kParsers{
    {"work_unit", parser<WorkUnit>()},
    {"result_manifest", parser<ResultManifest>()},
    {"register_request", parser<RegisterRequest>()},
    {"register_response", parser<RegisterResponse>()},
    {"work_request", parser<WorkRequest>()},
    {"work_response", parser<WorkResponse>()},
    {"work_unit_ref", parser<WorkUnitRef>()},
    {"heartbeat_response", parser<HeartbeatResponse>()},
    {"result_status", parser<ResultStatus>()},
    {"server_info", status_of(parse_server_info)},
    {"loss_report", status_of(parse_loss_report)},
};

int emit(const std::filesystem::path& dir) {
    auto key = SigningKey::generate();
    WorkResponse with_work;
    with_work.has_work = true;
    with_work.work_unit = seal_envelope(boost::json::serialize(to_json(example_work_unit())), kWorkUnitPurpose, key);
    const std::map<std::string, boost::json::value> examples{
        {"work_unit", to_json(example_work_unit())},
        {"work_unit.scheduled", to_json(example_scheduled_work_unit())},
        {"work_unit.twin", to_json(example_twin_work_unit())},
        {"work_unit.loss_check", to_json(example_loss_check_unit())},
        {"loss_report", to_json(example_loss_report())},
        {"result_manifest", to_json(example_result_manifest())},
        {"result_manifest.committed", to_json(example_committed_result_manifest())},
        {"register_request", to_json(example_register_request())},
        {"register_response", to_json(example_register_response())},
        {"work_request", to_json(example_work_request())},
        {"work_response.work", to_json(with_work)},
        {"work_response.no_work", to_json(example_no_work_response())},
        {"work_unit_ref", to_json(WorkUnitRef{"c-7f3a", "a-0123456789ab"})},
        {"heartbeat_response.continue", to_json(HeartbeatResponse{true, 1800001800})},
        {"heartbeat_response.stop", to_json(HeartbeatResponse{false, 0})},
        {"result_status.merged", to_json(ResultStatus{"a-0123456789ab", "merged", "", 1.6})},
        {"result_status.rejected", to_json(ResultStatus{"a-0123456789ab", "rejected", "loss_increase", 0})},
        {"server_info", to_json(ServerInfo{"0.1.0", example_register_response().server_public_key, "0123456789abcdef",
                                           1800000000, 300, "", "0.1.0"})},
        {"server_info.minimum", to_json(ServerInfo{"0.2.0", example_register_response().server_public_key,
                                                   "0123456789abcdef", 1800000000, 300, "0.1.5", "0.2.0"})},
    };
    for (const auto& [name, json] : examples) {
        auto status = write_file_atomic(dir / (name + ".json"), as_bytes(boost::json::serialize(json)));
        if (!status) {
            std::cerr << status.message() << "\n";
            return 2;
        }
    }
    return 0;
}

int parse(const std::string& type, const std::filesystem::path& file) {
    auto found = kParsers.find(type);
    if (found == kParsers.end()) {
        std::cerr << "unknown message type " << type << "\n";
        return 2;
    }
    auto text = read_file(file, 4 << 20);
    if (!text) {
        std::cerr << text.message() << "\n";
        return 2;
    }
    auto status = found->second(as_string_view(*text));
    if (!status) {
        std::cerr << status.message() << "\n";
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 3 && std::string(argv[1]) == "emit") return emit(argv[2]);
    if (argc == 4 && std::string(argv[1]) == "parse") return parse(argv[2], argv[3]);
    std::cerr << "usage: proto_tool emit DIR | proto_tool parse TYPE FILE\n";
    return 2;
}
