// Protocol messages: JSON round trips, and named errors for missing, unknown and ill-typed
// fields; a damaged manifest is an error, never a crash.
#include <doctest/doctest.h>

#include <boost/json/serialize.hpp>

#include "corrupt.h"
#include "protocol_examples.h"

using namespace tessera::common;
using namespace tessera::testing;

namespace {

template <class T>
std::string text_of(const T& message) {
    return boost::json::serialize(to_json(message));
}

// Parses `message`'s JSON after `edit` and returns the error ("" when it parsed).
template <class T>
std::string error_after(const T& message, const std::function<void(boost::json::object&)>& edit) {
    auto json = to_json(message);
    edit(json.as_object());
    auto parsed = parse_message<T>(boost::json::serialize(json));
    return parsed.ok() ? "" : parsed.message();
}

}  // namespace

TEST_CASE("every message survives a JSON round trip") {
    auto wu = parse_message<WorkUnit>(text_of(example_work_unit()));
    REQUIRE(wu.ok());
    CHECK(text_of(*wu) == text_of(example_work_unit()));
    CHECK(wu->hyper.lr == 3e-4);
    CHECK(wu->encoding.dtype == DeltaDType::Int8);

    auto manifest = parse_message<ResultManifest>(text_of(example_result_manifest()));
    REQUIRE(manifest.ok());
    CHECK(text_of(*manifest) == text_of(example_result_manifest()));

    CHECK(text_of(*parse_message<RegisterRequest>(text_of(example_register_request()))) ==
          text_of(example_register_request()));
    CHECK(text_of(*parse_message<RegisterResponse>(text_of(example_register_response()))) ==
          text_of(example_register_response()));
    CHECK(text_of(*parse_message<WorkRequest>(text_of(example_work_request()))) == text_of(example_work_request()));
    CHECK(text_of(*parse_message<WorkResponse>(text_of(example_no_work_response()))) ==
          text_of(example_no_work_response()));
}

TEST_CASE("a unit's optimizer and schedule fields are optional and round-trip") {
    auto plain = text_of(example_work_unit());
    CHECK(plain.find("optimizer") == std::string::npos);  // a unit without them keeps its old bytes
    CHECK(plain.find("schedule") == std::string::npos);
    auto old = parse_message<WorkUnit>(plain);
    REQUIRE(old.ok());
    CHECK(old->hyper.optimizer == InnerOptimizer::Fresh);
    CHECK_FALSE(old->hyper.schedule.has_value());

    auto scheduled = parse_message<WorkUnit>(text_of(example_scheduled_work_unit()));
    REQUIRE(scheduled.ok());
    CHECK(text_of(*scheduled) == text_of(example_scheduled_work_unit()));
    CHECK(scheduled->hyper.optimizer == InnerOptimizer::Kept);
    REQUIRE(scheduled->hyper.schedule.has_value());
    CHECK(*scheduled->hyper.schedule == *example_scheduled_work_unit().hyper.schedule);
    CHECK(scheduled->hyper.schedule_from == 640000);
    CHECK(scheduled->hyper.schedule_to == 665600);

    auto wu = example_scheduled_work_unit();
    auto hyper_error = [&](const std::function<void(boost::json::object&)>& edit) {
        return error_after(wu, [&](auto& o) { edit(o["hyper"].as_object()); });
    };
    CHECK(hyper_error([](auto& h) { h["optimizer"] = "warm"; }).find("field \"optimizer\": expected one of fresh, kept") !=
          std::string::npos);
    CHECK(hyper_error([](auto& h) { h.erase("schedule_to"); }).find("missing field \"schedule_to\"") !=
          std::string::npos);
    CHECK(hyper_error([](auto& h) { h.erase("schedule"); }).find("missing field \"schedule\"") != std::string::npos);
    CHECK(hyper_error([](auto& h) { h["schedule_to"] = 1; }).find("must not be below schedule_from") !=
          std::string::npos);
    CHECK(hyper_error([](auto& h) {
              h["schedule"].as_object()["kind"] = "linear";
          }).find("work_unit.hyper.schedule: field \"kind\"") == 0);
    CHECK(hyper_error([](auto& h) {
              h["schedule"].as_object()["total_samples"] = 10;
          }).find("total_samples must exceed warmup_samples") != std::string::npos);
    CHECK(hyper_error([](auto& h) {
              h["schedule"].as_object()["final_lr_ratio"] = 1.5;
          }).find("field \"final_lr_ratio\"") != std::string::npos);
    CHECK(hyper_error([](auto& h) {
              h.erase("schedule");
              h.erase("schedule_from");
              h.erase("schedule_to");
          }).empty());
}

TEST_CASE("a unit's patch_mask is written only when set, round-trips, and must be below 1") {
    CHECK(text_of(example_work_unit()).find("patch_mask") == std::string::npos);
    auto wu = example_work_unit();
    wu.hyper.patch_mask = 0.75;
    auto masked = parse_message<WorkUnit>(text_of(wu));
    REQUIRE(masked.ok());
    CHECK(masked->hyper.patch_mask == 0.75);
    auto hyper_error = [&](const std::function<void(boost::json::object&)>& edit) {
        return error_after(wu, [&](auto& o) { edit(o["hyper"].as_object()); });
    };
    CHECK(hyper_error([](auto& h) { h["patch_mask"] = 1.0; }).find("patch_mask") != std::string::npos);
    CHECK(hyper_error([](auto& h) { h["patch_mask"] = -0.5; }).find("patch_mask") != std::string::npos);
    CHECK(hyper_error([](auto& h) { h["patch_mask"] = 0.0; }).empty());
}

TEST_CASE("a unit's encoding.residual is written only when held, round-trips, and takes carried or held") {
    CHECK(text_of(example_work_unit()).find("residual") == std::string::npos);
    auto wu = example_work_unit();
    wu.encoding.carry_residual = false;
    auto held = parse_message<WorkUnit>(text_of(wu));
    REQUIRE(held.ok());
    CHECK_FALSE(held->encoding.carry_residual);
    CHECK(text_of(*held).find("\"residual\":\"held\"") != std::string::npos);
    auto encoding_error = [&](const std::function<void(boost::json::object&)>& edit) {
        return error_after(wu, [&](auto& o) { edit(o["encoding"].as_object()); });
    };
    CHECK(encoding_error([](auto& e) { e["residual"] = "dropped"; }).find("expected one of carried, held") !=
          std::string::npos);
    CHECK(encoding_error([](auto& e) { e["residual"] = "carried"; }).empty());
    auto carried = parse_message<WorkUnit>(text_of(example_work_unit()));
    REQUIRE(carried.ok());
    CHECK(carried->encoding.carry_residual);
}

TEST_CASE("a unit's moments are written only when set, round-trip, and need kept AdamW") {
    CHECK(text_of(example_scheduled_work_unit()).find("moments") == std::string::npos);
    auto twin = parse_message<WorkUnit>(text_of(example_twin_work_unit()));
    REQUIRE(twin.ok());
    REQUIRE(twin->moments);
    CHECK(twin->moments->sha256 == std::string(64, '9'));
    CHECK(twin->moments->bytes == 1 << 20);
    CHECK(text_of(*twin) == text_of(example_twin_work_unit()));
    auto wu = example_twin_work_unit();
    CHECK(error_after(wu, [](auto& o) {
              o["hyper"].as_object()["optimizer"] = "fresh";
          }).find("only a unit with optimizer \"kept\" resumes moments") != std::string::npos);
    CHECK(error_after(wu, [](auto& o) {
              o["moments"].as_object()["sha256"] = "XYZ";
          }).find("work_unit.moments: field \"sha256\"") == 0);
    CHECK(error_after(wu, [](auto& o) { o["moments"].as_object().erase("bytes"); }).find("bytes") != std::string::npos);
}

TEST_CASE("a loss-check unit's question is written only when set, round-trips, and resumes no moments") {
    CHECK(text_of(example_work_unit()).find("\"check\"") == std::string::npos);
    auto unit = parse_message<WorkUnit>(text_of(example_loss_check_unit()));
    REQUIRE(unit.ok());
    REQUIRE(unit->check);
    CHECK(unit->check->result.sha256 == std::string(64, '7'));
    CHECK(unit->check->held_out.bytes == 1 << 22);
    CHECK(unit->check->samples == 128);
    CHECK(text_of(*unit) == text_of(example_loss_check_unit()));
    auto with_moments = example_loss_check_unit();
    with_moments.hyper.optimizer = InnerOptimizer::Kept;
    with_moments.moments = BlobRef{std::string(64, '9'), 1024};
    CHECK(parse_message<WorkUnit>(text_of(with_moments)).message().find("a loss-check unit resumes no moments") !=
          std::string::npos);
    CHECK(error_after(example_loss_check_unit(), [](auto& o) {
              o["check"].as_object()["samples"] = kMaxCheckSamples + 1;
          }).find("work_unit.check: field \"samples\"") == 0);
    CHECK(error_after(example_loss_check_unit(), [](auto& o) {
              o["check"].as_object()["model"] = "dit-tiny";
          }).find("unknown field \"model\"") != std::string::npos);
}

TEST_CASE("a loss report round-trips and names what is wrong with a damaged one") {
    auto bytes = loss_report_bytes(example_loss_report());
    auto report = parse_loss_report(bytes);
    REQUIRE(report.ok());
    CHECK(report->held_out_before == std::vector<double>{0.5, 0.25, 1.0});
    CHECK(report->own_after == std::vector<double>{0.5, 0.5});
    CHECK(loss_report_bytes(*report) == bytes);
    auto damaged = [](const std::function<void(LossReport&)>& edit) {
        auto r = example_loss_report();
        edit(r);
        return parse_loss_report(loss_report_bytes(r)).message();
    };
    CHECK(damaged([](auto& r) { r.held_out_after.pop_back(); }).find("as many losses each") != std::string::npos);
    CHECK(damaged([](auto& r) { r.own_before.push_back(1); }).find("as many losses each") != std::string::npos);
    CHECK(damaged([](auto& r) { r.own_after[1] = -1; }).find("\"own_after\"[1]: expected a finite loss") !=
          std::string::npos);
    CHECK(damaged([](auto& r) { r.held_out_before.clear(); }).find("held_out_before") != std::string::npos);
    CHECK(!parse_loss_report("{\"held_out_before\": [1e999]}").ok());
    CHECK(!parse_loss_report(std::string(50, '[')).ok());
}

TEST_CASE("a work response carries a signed work unit that verifies after parsing") {
    auto key = SigningKey::generate();
    WorkResponse response;
    response.has_work = true;
    response.work_unit = seal_envelope(text_of(example_work_unit()), kWorkUnitPurpose, key);
    auto parsed = parse_message<WorkResponse>(text_of(response));
    REQUIRE(parsed.ok());
    REQUIRE(parsed->has_work);
    auto payload = open_envelope(parsed->work_unit, kWorkUnitPurpose, key.verify_key());
    REQUIRE(payload.ok());
    CHECK(parse_message<WorkUnit>(*payload).value().wu_id == "wu-000042");
}

TEST_CASE("missing, unknown and ill-typed fields are named") {
    auto wu = example_work_unit();
    CHECK(error_after(wu, [](auto& o) { o.erase("wu_id"); }) == "work_unit: missing field \"wu_id\" (a string)");
    CHECK(error_after(wu, [](auto& o) { o["surprise"] = 1; }) == "work_unit: unknown field \"surprise\"");
    CHECK(error_after(wu, [](auto& o) {
              o["base_version"] = "17";
          }).find("work_unit: field \"base_version\": expected an integer") == 0);
    CHECK(error_after(wu, [](auto& o) { o["hyper"].as_object()["lr"] = -1; }).find("work_unit.hyper: field \"lr\"") ==
          0);
    CHECK(error_after(wu, [](auto& o) {
              o["hyper"].as_object().erase("seed");
          }).find("work_unit.hyper: missing field \"seed\"") == 0);
    CHECK(error_after(wu, [](auto& o) {
              o["shards"].as_array()[1].as_object()["sha256"] = "ABC";
          }).find("work_unit.shards[1]: field \"sha256\"") == 0);
    CHECK(error_after(wu, [](auto& o) { o["shards"] = boost::json::array(); }).find("field \"shards\"") !=
          std::string::npos);
    CHECK(error_after(wu, [](auto& o) {
              o["encoding"].as_object()["dtype"] = "int3";
          }).find("work_unit.encoding: field \"dtype\": expected one of f32, bf16, int8, int4, int2") == 0);
    CHECK(error_after(wu, [](auto& o) { o["wu_id"] = "../etc/passwd"; }).find("A-Z a-z 0-9") != std::string::npos);
    CHECK(error_after(wu, [](auto& o) { o["deadline"] = 1; }).find("deadline must be after issued_at") !=
          std::string::npos);
    CHECK(error_after(wu, [](auto& o) { o["patches"] = boost::json::array(); }).find("both empty or neither") !=
          std::string::npos);
    CHECK(error_after(wu, [](auto& o) { o["patch_from"] = "abc"; }).find("field \"patch_from\"") != std::string::npos);
    CHECK(error_after(wu, [](auto& o) {
              o["patches"].as_array()[0].as_object()["bytes"] = -1;
          }).find("work_unit.patches[0]: field \"bytes\"") == 0);
    CHECK(error_after(wu, [](auto& o) {
              o.erase("patch_from");
              o.erase("patches");
          }).empty());  // units from servers without patches

    auto manifest = example_result_manifest();
    CHECK(error_after(manifest, [](auto& o) {
              o["metrics"].as_object()["samples"] = 1.5;
          }).find("result_manifest.metrics: field \"samples\"") == 0);
    CHECK(error_after(manifest, [](auto& o) {
              o["encoding"].as_object()["topk_fraction"] = 0;
          }).find("must be above 0") != std::string::npos);

    CHECK(error_after(example_register_request(), [](auto& o) {
              o["public_key"] = "AAAA";
          }).find("register_request: field \"public_key\"") == 0);
    CHECK(error_after(example_work_request(), [](auto& o) {
              o["device"].as_object()["kind"] = "tpu";
          }).find("work_request.device: field \"kind\"") == 0);
    CHECK(error_after(example_work_request(), [](auto& o) {
              o["cached_shards"].as_array().push_back(5);
          }).find("cached_shards") != std::string::npos);
    CHECK(error_after(example_work_request(), [](auto& o) { o["held_model"] = "xyz"; }).find("held_model") !=
          std::string::npos);
    CHECK(error_after(example_work_request(), [](auto& o) { o.erase("held_model"); }).empty());
    // The task choice: optional (an older client's request has none), names only.
    CHECK(error_after(example_work_request(), [](auto& o) {
              o.erase("tasks");
              o.erase("exclude_tasks");
          }).empty());
    CHECK(error_after(example_work_request(), [](auto& o) {
              o["tasks"] = boost::json::array{"a b"};
          }).find("field \"tasks\"") != std::string::npos);
    CHECK(error_after(example_work_request(), [](auto& o) { o["exclude_tasks"] = "cnn"; }).find("exclude_tasks") !=
          std::string::npos);
    CHECK(error_after(example_no_work_response(), [](auto& o) { o["retry_after_s"] = 0; }).find("retry_after_s") !=
          std::string::npos);
    CHECK(error_after(example_no_work_response(), [](auto& o) {
              o["work_unit"] = 1;
          }).find("unknown field \"work_unit\"") != std::string::npos);
}

TEST_CASE("a damaged manifest is an error or a valid message, never a crash") {
    auto text = text_of(example_work_unit());
    Bytes bytes(text.begin(), text.end());
    tessera::testing::for_each_truncation(
        bytes, [](const Bytes& damaged) { CHECK_FALSE(parse_message<WorkUnit>(as_string_view(damaged)).ok()); });
    for (std::uint8_t mask : {0x01, 0x20, 0x80})
        tessera::testing::for_each_flip(bytes, mask, [](const Bytes& damaged, std::size_t) {
            auto parsed = parse_message<WorkUnit>(as_string_view(damaged));
            if (parsed.ok()) CHECK(parsed->shards.size() == 2);
        });
    CHECK_FALSE(parse_message<WorkUnit>("{\"wu_id\":\"a\",\"wu_id\":\"b\"}").ok());
    CHECK_FALSE(parse_message<WorkUnit>(std::string(2 << 20, ' ')).ok());
}
