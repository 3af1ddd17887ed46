// Every JSON message of the protocol, parsed as the server (requests, manifests) and the
// client (answers, work units) parse them; the first byte picks the message.
#include <boost/json.hpp>

#include "fuzz_target.h"
#include "json_strict.h"
#include "protocol.h"

using namespace tessera::common;

namespace {

template <class Message>
void parse_as(std::string_view text) {
    (void)parse_message<Message>(text);
}

constexpr int kMessages = 9;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
    switch (data[0] % kMessages) {
        case 0: parse_as<WorkUnit>(text); break;
        case 1: parse_as<ResultManifest>(text); break;
        case 2: parse_as<RegisterRequest>(text); break;
        case 3: parse_as<RegisterResponse>(text); break;
        case 4: parse_as<WorkRequest>(text); break;
        case 5: parse_as<WorkResponse>(text); break;
        case 6: parse_as<WorkUnitRef>(text); break;
        case 7: parse_as<HeartbeatResponse>(text); break;
        default: parse_as<ResultStatus>(text); break;
    }
    (void)parse_json_strict(text);
    return 0;
}

std::vector<Bytes> fuzz_seeds() {
    auto seed = [](int kind, const boost::json::value& json) {
        auto text = boost::json::serialize(json);
        Bytes bytes{static_cast<std::uint8_t>(kind)};
        bytes.insert(bytes.end(), text.begin(), text.end());
        return bytes;
    };
    const std::string hash(64, 'a');
    WorkUnit unit;
    unit.wu_id = "a-0123456789ab";
    unit.task_id = "t-1";
    unit.client_id = "c-1";
    unit.model = "dit-tiny";
    unit.model_blob = {hash, 1000};
    unit.shards = {{hash, 2000}};
    unit.hyper = {50, 64, 3e-4, 5, 0.0, 1.0, 7};
    unit.issued_at = 1'800'000'000;
    unit.deadline = unit.issued_at + 600;
    ResultManifest manifest;
    manifest.wu_id = unit.wu_id;
    manifest.client_id = "c-1";
    manifest.delta_blob = {hash, 1234};
    manifest.metrics = {1.0, 0.9, 3200, 1.0, 100.0};
    manifest.device = "cpu:test";
    WorkRequest request;
    request.client_id = "c-1";
    request.device = {"cpu", "test", 1 << 30, 2};
    request.cached_shards = {hash};
    return {seed(0, to_json(unit)),
            seed(1, to_json(manifest)),
            seed(2, to_json(RegisterRequest{std::string(44, 'A'), "volunteer", "0.1.0"})),
            seed(3, to_json(RegisterResponse{"c-1", std::string(44, 'A'), std::string(16, 'b')})),
            seed(4, to_json(request)),
            seed(6, to_json(WorkUnitRef{"c-1", unit.wu_id})),
            seed(7, to_json(HeartbeatResponse{true, unit.deadline})),
            seed(8, to_json(ResultStatus{unit.wu_id, "rejected", "misaligned", 0}))};
}
