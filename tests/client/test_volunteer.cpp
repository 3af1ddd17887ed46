// The volunteer's loop against a real in-process server: a unit trained and uploaded with
// the device reported truthfully and the shards remembered; retries that end when the user
// asks; permanent refusals and corrupt blobs that stop it with a clear message; the server's
// "stop" answer to a heartbeat; a result kept across a restart and uploaded by the next run;
// the error-feedback residual carried from unit to unit and across restarts; kept moments and
// an audit twin's sent ones
// (test_volunteer_control.cpp: patches, a pause and a preference's wait).
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <thread>

#include <boost/json.hpp>

#include "blob_cache.h"
#include "blob_store.h"
#include "client_state.h"
#include "file_io.h"
#include "heartbeat.h"
#include "machine_sensors.h"
#include "server_api.h"
#include "server_fixture.h"
#include "sha256.h"
#include "training/error_feedback.h"
#include "training/optimizer_state.h"
#include "training/work_runner.h"
#include "zstd_codec.h"
#include "volunteer.h"
#include "volunteer_fixture.h"

using namespace tessera;
using namespace tessera::testing;
using client::StopReason;

namespace {

double norm_of(const common::NamedTensors& tensors) {
    double sum = 0;
    for (const auto& tensor : tensors)
        for (float value : tensor.values) sum += static_cast<double>(value) * value;
    return std::sqrt(sum);
}

// Empty when a trained unit's upload keeps its commitments' identity (common/commitments.h).
std::string commitments_broken(const common::WorkUnit& wu, const client::RunOutput& output) {
    auto upload = common::decode_delta(output.delta).value().tensors;
    return common::commitments_mismatch(output.commitments, upload, wu.hyper.local_steps,
                                        static_cast<std::uint64_t>(wu.hyper.seed));
}

}  // namespace

TEST_CASE(
    "a volunteer trains a unit, reports its device, remembers its shards, keeps its residual and counts its "
    "bytes; a ban stops it") {
    TestServer server;  // int8 deltas: lossy, so there is an error-feedback residual to keep
    set_to_wall_clock(server);
    TempDir dir;
    // An unreadable residual file is reported, and the volunteer starts without it.
    client::ClientState state(dir / "volunteer");
    std::filesystem::create_directories(state.root());
    { std::ofstream(state.feedback_file()) << "not a safetensors file"; }
    CHECK_FALSE(client::load_error_feedback(state.feedback_file()).ok());
    auto options = options_for(server.port(), dir / "volunteer");
    options.once = true;
    client::VolunteerControl control;
    auto stop = client::run_volunteer(options, control);
    INFO(stop.message);
    CHECK(stop.reason == StopReason::OnceDone);
    CHECK(stop.message.empty());

    auto device = client::probe_device("cpu", 1).value();
    CHECK(device.kind == "cpu");
    CHECK(device.memory_bytes > (std::int64_t{64} << 20));
    auto clients = server.store().clients().value();
    REQUIRE(clients.size() == 1);
    CHECK(clients[0].device == "cpu:" + device.name);

    CHECK(!state.load_current().value().has_value());
    auto kept = client::load_error_feedback(state.feedback_file()).value();
    CHECK(kept.task_id == server.config().task_id);
    CHECK(!kept.residual.empty());
    auto remembered = state.load_remembered().value();
    CHECK(remembered.samples_per_s > 0);
    // The result's validation runs on the server's pool: settled first, so that it is not
    // counted once as returned and again as accepted by queries either side of its verdict.
    server.app().wait_idle();
    auto units = server.store().in_state(AssignmentState::Returned).value();
    auto accepted = server.store().in_state(AssignmentState::Accepted).value();
    auto merged = server.store().in_state(AssignmentState::Merged).value();
    units.insert(units.end(), accepted.begin(), accepted.end());
    units.insert(units.end(), merged.begin(), merged.end());
    REQUIRE(units.size() == 1);
    auto unit = server.store().work_unit(units[0].work_unit_id).value().value();
    auto shards = unit.shards;
    std::sort(shards.begin(), shards.end());
    CHECK(remembered.shards == shards);

    // What it moved: the model and the shards down (its cache holds exactly them), the result up.
    auto board = control.status.to_json();
    std::int64_t cached = 0;
    for (const auto& entry : std::filesystem::directory_iterator(state.cache_dir()))
        cached += static_cast<std::int64_t>(entry.file_size());
    CHECK(cached > 0);
    CHECK(board.at("downloaded_bytes").as_int64() == cached);
    REQUIRE(units[0].delta_bytes.has_value());
    CHECK(board.at("uploaded_bytes").as_int64() >= *units[0].delta_bytes);
    CHECK(board.at("uploaded_bytes").as_int64() < cached);  // int8 and compressed: well under an f32 model

    // Banned: asking for work is refused for good, and the message says why.
    REQUIRE(server.store().set_client_banned(clients[0].id, true, server.now()).ok());
    stop = client::run_volunteer(options, control);
    CHECK(stop.reason == StopReason::Error);
    CHECK(stop.message.find("banned") != std::string::npos);
}

TEST_CASE("a refusal is permanent: a wrong server path stops the volunteer at once") {
    TestServer server;
    set_to_wall_clock(server);
    TempDir dir;
    auto options = options_for(server.port(), dir / "volunteer");
    options.server += "/no-such-prefix";
    options.retry = {std::chrono::hours(1), std::chrono::hours(1)};  // a retry would hang the test
    client::VolunteerControl control;
    auto stop = client::run_volunteer(options, control);
    CHECK(stop.reason == StopReason::Error);
    CHECK(stop.message.find("HTTP 404") != std::string::npos);
}

TEST_CASE("retries end when the volunteer is asked to stop") {
    std::uint16_t port = 0;
    {
        TestServer gone;
        port = gone.port();
    }  // nothing listens there now
    TempDir dir;
    auto options = options_for(port, dir / "volunteer");
    VolunteerThread volunteer(options);
    // The key is made just before the first registration attempt.
    CHECK(eventually([&] { return std::filesystem::exists(dir / "volunteer" / "client_key.pem"); }));
    volunteer.control().stop_after_unit = true;
    auto stop = volunteer.join();
    CHECK(stop.reason == StopReason::Requested);
    CHECK(stop.message.find("stopped while waiting to retry") != std::string::npos);
}

TEST_CASE("a blob that keeps arriving corrupt is given back and stops the volunteer") {
    TestServer server;
    set_to_wall_clock(server);
    auto task = server.store().current_task().value().value();
    auto path = server.state().blobs() / server.store().versions(task.id).value().at(0).blob_sha256;
    {
        std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
        file.seekp(100);
        file.put('\x7f');
    }
    TempDir dir;
    auto options = options_for(server.port(), dir / "volunteer");
    options.once = true;
    client::VolunteerControl control;
    auto stop = client::run_volunteer(options, control);
    CHECK(stop.reason == StopReason::Error);
    CHECK(stop.message.find("arrived with hash") != std::string::npos);
    CHECK(in_progress(server).empty());
    CHECK(server.store().in_state(AssignmentState::Abandoned).value().size() == 1);
}

TEST_CASE("heartbeats: keep working while the unit is ours, stop once it has timed out, ignore other errors") {
    TestServer server([](TaskConfig& config) { config.deadline_s = 60; });  // inside the 300 s signing window
    set_to_wall_clock(server);
    TestVolunteer volunteer(server);
    auto unit = volunteer.request_work().value();
    client::HttpClient http;
    auto api = api_of(volunteer, server, http);
    common::Logger log("tessera-client", true, false);
    {
        client::HeartbeatSender heartbeat(api, {}, unit.wu_id, std::chrono::milliseconds(20), log);
        REQUIRE(eventually([&] { return heartbeat.sent() >= 3; }));
        CHECK(!heartbeat.told_to_stop());  // answered keep_working: true
    }
    {
        client::HeartbeatSender other(api, {}, "a-000000000000", std::chrono::milliseconds(20), log);
        CHECK(eventually([&] { return other.told_to_stop(); }));  // not ours: 404
    }
    {
        auto other_key = common::SigningKey::generate();
        client::ServerApi stranger(api.server(), http, other_key);  // signatures the server refuses (401)
        stranger.set_client_id(volunteer.id());
        client::HeartbeatSender refused(stranger, {}, unit.wu_id, std::chrono::milliseconds(20), log);
        REQUIRE(eventually([&] { return refused.sent() >= 3; }));
        CHECK(!refused.told_to_stop());
    }
    server.advance(61);  // past the deadline: keep_working false
    client::HeartbeatSender late(api, {}, unit.wu_id, std::chrono::milliseconds(20), log);
    CHECK(eventually([&] { return late.told_to_stop(); }));
}

TEST_CASE("a heartbeat answered 'stop' ends training, and the unit is not uploaded") {
    TestServer server([](TaskConfig& config) {
        config.local_steps = 100000;  // minutes of training
        config.deadline_s = 60;       // inside the 300 s signing window
    });
    set_to_wall_clock(server);
    TempDir dir;
    auto options = options_for(server.port(), dir / "volunteer");
    options.heartbeat_interval = std::chrono::milliseconds(50);
    VolunteerThread volunteer(options);
    REQUIRE(eventually([&] { return in_progress(server).size() == 1; }));
    auto unit = in_progress(server).at(0);
    volunteer.control().stop_after_unit = true;        // finish this unit, then stop: only the server can end it early
    server.advance(unit.deadline - server.now() + 1);  // past its deadline: heartbeats answer keep_working false
    auto stop = volunteer.join();
    CHECK(stop.reason == StopReason::Requested);
    CHECK(state_of(server, unit.id) == "in_progress");  // neither uploaded nor abandoned: the server ended it
    client::ClientState state(dir / "volunteer");
    CHECK(!state.load_current().value().has_value());
    CHECK(state.load_remembered().value().samples_per_s == 0);  // training never finished
}

TEST_CASE("a result that could not be uploaded is kept and uploaded by the next run") {
    TestServer server([](TaskConfig& config) { config.local_steps = 1000; });  // seconds of training
    set_to_wall_clock(server);
    TempDir dir;
    auto options = options_for(server.port(), dir / "volunteer");
    VolunteerThread volunteer(options);
    REQUIRE(eventually([&] { return in_progress(server).size() == 1; }));
    auto unit = in_progress(server).at(0);
    // Training starts once the model and the unit's shards are in the cache.
    auto blobs = 1 + server.store().work_unit(unit.work_unit_id).value().value().shards.size();
    REQUIRE(eventually([&] { return client::BlobCache(dir / "volunteer" / "cache", 1 << 30).held().size() == blobs; }));
    server.stop();                               // while it trains: the upload will find no server
    volunteer.control().stop_after_unit = true;  // and the retry gives up at once
    auto stop = volunteer.join();
    CHECK(stop.reason == StopReason::Requested);
    CHECK(stop.message.find("uploaded when the client starts again") != std::string::npos);
    auto kept = client::ClientState(dir / "volunteer").load_current().value();
    REQUIRE(kept.has_value());
    CHECK(kept->wu_id == unit.id);
    CHECK(kept->phase == "uploading");

    server.start();  // on a new port
    auto restarted = options_for(server.port(), dir / "volunteer");
    restarted.once = true;
    client::VolunteerControl fresh;
    stop = client::run_volunteer(restarted, fresh);
    CHECK(stop.reason == StopReason::OnceDone);
    CHECK(state_of(server, unit.id) != "in_progress");
    CHECK(server.store().assignment(unit.id).value()->returned_at.has_value());
}

TEST_CASE(
    "error feedback: the residual is added to the next delta, survives a save and load, and is dropped for "
    "another task") {
    TestServer server([](TaskConfig& config) { config.codec = {common::DeltaDType::Int4, 0.05}; });
    auto [wu, model, shards] = unit_to_train(server);
    client::ErrorFeedback feedback;
    client::RunOptions run;
    run.device = "cpu";
    run.threads = 1;
    run.feedback = &feedback;
    auto train = [&] { return client::run_work_unit(wu, model, shards, run).value(); };
    auto first = train();
    CHECK(common::is_zstd_frame(first.delta));  // as uploaded
    CHECK(first.feedback_note.empty());
    // Commitments: a segment after each step, their losses the steps', the upload bound to them.
    CHECK(first.commitments.segments.size() == static_cast<std::size_t>(wu.hyper.local_steps));
    CHECK(first.commitments.segments.back().norm > 0);
    CHECK(first.commitments.residual_in.sha256.empty());
    CHECK(first.commitments.residual_out.sha256 == common::residual_sha256(feedback.residual));
    CHECK(commitments_broken(wu, first).empty());
    CHECK(feedback.task_id == wu.task_id);
    CHECK(feedback.model == "dit-tiny");
    REQUIRE(!feedback.residual.empty());
    double carried = 0;
    for (const auto& t : feedback.residual)
        for (float v : t.values) carried += std::fabs(v);
    CHECK(carried > 0);  // top-k 5 % left most entries out

    // A large planted entry is sent by the next unit, within int4's error, and leaves the residual.
    // (1.5 × the left-out part's norm: the residual stays within twice the delta's norm, unclipped.)
    auto planted = static_cast<float>(1.5 * norm_of(feedback.residual));
    feedback.residual[0].values[3] = planted;
    TempDir dir;
    REQUIRE(client::save_error_feedback(dir / "feedback", feedback).ok());
    auto loaded = client::load_error_feedback(dir / "feedback").value();
    CHECK(loaded.task_id == feedback.task_id);
    CHECK(loaded.residual[0].values == feedback.residual[0].values);
    run.feedback = &loaded;
    auto carried_in = common::residual_sha256(loaded.residual);  // within the clip: sent as it is
    auto second_output = train();
    CHECK(second_output.commitments.residual_in.sha256 == carried_in);
    CHECK(commitments_broken(wu, second_output).empty());
    auto tampered = second_output.commitments;  // the carried residual left out of the account
    tampered.residual_in = {};
    CHECK_FALSE(common::commitments_mismatch(tampered, common::decode_delta(second_output.delta).value().tensors,
                                             wu.hyper.local_steps, static_cast<std::uint64_t>(wu.hyper.seed))
                    .empty());
    auto second = common::decode_delta(second_output.delta).value();
    CHECK(second.tensors[0].name == loaded.residual[0].name);
    CHECK(std::fabs(second.tensors[0].values[3] - planted) < planted / 10);  // half an int4 step: 1/15
    CHECK(std::fabs(loaded.residual[0].values[3]) < planted / 10);

    // A residual of another task is dropped with a note, and this unit's replaces it.
    loaded.task_id = "t-another";
    loaded.residual[0].values[3] = 10.0f;
    auto third = train();
    CHECK(third.feedback_note.find("dropped the error-feedback residual") != std::string::npos);
    CHECK(std::fabs(common::decode_delta(third.delta).value().tensors[0].values[3]) < 1.0f);
    CHECK(loaded.task_id == wu.task_id);

    // A lossless codec carries nothing.
    wu.encoding = {common::DeltaDType::F32, 1.0};
    auto lossless = train();
    CHECK(loaded.residual.empty());
    CHECK(lossless.commitments.residual_out.sha256.empty());
    CHECK(commitments_broken(wu, lossless).empty());
    REQUIRE(client::save_error_feedback(dir / "feedback", loaded).ok());
    CHECK(!std::filesystem::exists(dir / "feedback"));
}

TEST_CASE("a unit that holds the residual is encoded alone, and what it left out joins the residual") {
    TestServer server([](TaskConfig& config) { config.codec = {common::DeltaDType::Int2, 0.02}; });
    auto [wu, model, shards] = unit_to_train(server);
    wu.encoding.carry_residual = false;  // as a replica is sent
    client::RunOptions run;
    run.device = "cpu";
    run.threads = 1;
    auto train_with = [&](client::ErrorFeedback& feedback) {
        run.feedback = &feedback;
        return client::run_work_unit(wu, model, shards, run).value();
    };
    // Two volunteers with different carried residuals upload the same bytes: twins can agree.
    client::ErrorFeedback empty;
    auto alone = train_with(empty);
    client::ErrorFeedback carried = empty;  // this unit's left-out part: the right task and layout
    REQUIRE(!carried.residual.empty());
    for (auto& tensor : carried.residual) std::fill(tensor.values.begin(), tensor.values.end(), 0.0f);
    auto left_out = empty.residual;
    auto planted = static_cast<float>(1.5 * norm_of(left_out));  // within the clip's bound below
    carried.residual[0].values[3] = planted;
    auto held = train_with(carried);
    CHECK(held.feedback_note.empty());
    CHECK(held.delta == alone.delta);
    // Its commitments name no residual in and its own leftover out, not the one it holds.
    CHECK(held.commitments.residual_in.sha256.empty());
    CHECK(held.commitments.residual_out.sha256 == alone.commitments.residual_out.sha256);
    CHECK(commitments_broken(wu, held).empty());
    // The planted entry was not sent; it waits in the residual beside what this unit left out.
    CHECK(std::fabs(common::decode_delta(held.delta).value().tensors[0].values[3]) < 1.0f);
    CHECK(carried.residual[0].values[3] == doctest::Approx(planted + left_out[0].values[3]));
    CHECK(carried.residual[1].values == left_out[1].values);

    // The next carried unit sends it.
    wu.encoding.carry_residual = true;
    auto next = train_with(carried);
    CHECK(next.feedback_note.empty());
    CHECK(std::fabs(common::decode_delta(next.delta).value().tensors[0].values[3] - planted) < planted / 5);

    // A residual far past twice the delta's norm is scaled down before it is sent.
    carried.residual[0].values[3] = 100 * planted;
    auto clipped = train_with(carried);
    CHECK(clipped.feedback_note.find("scaled the carried residual") != std::string::npos);
    CHECK(commitments_broken(wu, clipped).empty());  // r_in is the clipped residual
    auto sent = common::decode_delta(clipped.delta).value().tensors[0].values[3];
    CHECK(sent < 3 * planted);  // at most twice the delta's norm, against 100 × planted
}

TEST_CASE("a carried residual is clipped to twice the delta's norm, and one within the bound is left alone") {
    auto tensors = [](std::vector<float> values) {
        common::NamedTensors named(1);
        named[0].name = "w";
        named[0].shape = {static_cast<std::int64_t>(values.size())};
        named[0].values = std::move(values);
        return named;
    };
    auto delta = tensors({3.0f, 4.0f});      // norm 5
    auto residual = tensors({0.0f, 30.0f});  // norm 30: three times the bound of 10
    CHECK(client::clip_residual(residual, delta) == doctest::Approx(1.0 / 3.0));
    CHECK(residual[0].values[1] == doctest::Approx(10.0f));
    auto small = tensors({6.0f, 8.0f});  // norm 10: at the bound
    CHECK(client::clip_residual(small, delta) == 1.0);
    CHECK(small[0].values == std::vector<float>{6.0f, 8.0f});
    auto nothing = tensors({0.0f, 0.0f});
    auto any = tensors({1.0f, 1.0f});
    CHECK(client::clip_residual(any, nothing) == 0.0);  // no delta: nothing carried
    CHECK(any[0].values == std::vector<float>{0.0f, 0.0f});
}

TEST_CASE(
    "a kept optimizer carries its moments from unit to unit of a kept-state task, a fresh unit leaves them, and "
    "another task's are dropped with a note") {
    TestServer server;
    auto [wu, model, shards] = unit_to_train(server);
    client::KeptOptimizerState kept;
    client::RunOptions run;
    run.device = "cpu";
    run.threads = 1;
    run.optimizer = &kept;
    wu.hyper.optimizer = common::InnerOptimizer::Kept;
    auto train = [&] { return client::run_work_unit(wu, model, shards, run).value(); };
    const auto steps = wu.hyper.local_steps;

    auto first = train();
    CHECK(first.optimizer_note.empty());
    CHECK(first.commitments.moments_in == common::MomentsCommitment{});  // zero moments
    CHECK(kept.task_id == wu.task_id);
    CHECK(kept.model == wu.model);
    CHECK(kept.steps == steps);
    REQUIRE(!kept.exp_avg.empty());
    CHECK(kept.exp_avg.size() == kept.exp_avg_sq.size());

    // A fresh unit (a replica) trains from zero moments and leaves the kept ones alone.
    auto kept_before = kept.exp_avg;
    wu.hyper.optimizer = common::InnerOptimizer::Fresh;
    auto replica = train();
    run.optimizer = nullptr;
    CHECK(replica.delta == train().delta);  // as a client that keeps nothing trains it
    run.optimizer = &kept;
    CHECK(kept.steps == steps);
    CHECK(kept.exp_avg[0].values == kept_before[0].values);
    wu.hyper.optimizer = common::InnerOptimizer::Kept;

    auto resumed = common::MomentsCommitment{common::moments_sha256(kept.exp_avg, kept.exp_avg_sq), kept.steps};
    auto second = train();  // the same unit again, continuing the moments
    CHECK(second.commitments.moments_in == resumed);  // what an audit asks the volunteer for
    CHECK(kept.steps == 2 * steps);
    CHECK(second.delta != first.delta);

    // Another task's moments are not used: the unit trains from fresh ones, as the first did.
    kept.task_id = "t-another";
    auto third = train();
    CHECK(third.optimizer_note.find("dropped the kept optimizer state: it belongs to task t-another") == 0);
    CHECK(kept.steps == steps);
    CHECK(kept.task_id == wu.task_id);
    CHECK(third.delta == first.delta);

    // Moments that do not fit the model are dropped with a note, and fresh ones trained.
    kept.exp_avg.pop_back();
    auto fourth = train();
    CHECK(fourth.optimizer_note.find("dropped the kept optimizer state") != std::string::npos);
    CHECK(fourth.delta == first.delta);
    CHECK(fourth.commitments.moments_in == common::MomentsCommitment{});  // trained from zero moments
    CHECK(kept.steps == steps);
}

TEST_CASE("an audit twin of a kept unit resumes the moments it was sent, as their volunteer did, and keeps its own") {
    TestServer server;
    auto [wu, model, shards] = unit_to_train(server);
    wu.hyper.optimizer = common::InnerOptimizer::Kept;
    client::RunOptions run;
    run.device = "cpu";
    run.threads = 1;
    client::KeptOptimizerState audited, own;  // the audited volunteer's moments, and the auditor's
    run.optimizer = &audited;
    (void)client::run_work_unit(wu, model, shards, run).value();
    TempDir dir;
    auto moments = dir / "moments.safetensors";  // what the audited volunteer posts when asked
    REQUIRE(client::save_optimizer_state(moments, audited));
    auto original = client::run_work_unit(wu, model, shards, run).value();  // resumes them
    REQUIRE(original.commitments.moments_in);
    CHECK_FALSE(original.commitments.moments_in->sha256.empty());

    auto other = wu;
    other.hyper.seed += 1;
    run.optimizer = &own;
    (void)client::run_work_unit(other, model, shards, run).value();  // the auditor's own moments
    const auto own_before = own;
    auto twin = wu;
    auto bytes = common::read_file(moments, 1 << 30).value();
    twin.moments = common::BlobRef{common::sha256_hex(bytes), static_cast<std::int64_t>(bytes.size())};
    run.twin_moments = moments;
    auto computed = client::run_work_unit(twin, model, shards, run).value();
    CHECK(computed.commitments.moments_in == original.commitments.moments_in);
    CHECK(computed.delta == original.delta);  // the same training, step for step
    CHECK(computed.optimizer_note.empty());
    CHECK(own.steps == own_before.steps);  // the auditor's own moments untouched
    CHECK(own.exp_avg[0].values == own_before.exp_avg[0].values);

    // Moments it cannot read are an error, never a fall-back to other moments.
    run.twin_moments = dir / "missing.safetensors";
    auto missing = client::run_work_unit(twin, model, shards, run);
    REQUIRE_FALSE(missing);
    CHECK(missing.message().find("the moments to resume") == 0);
    REQUIRE(common::write_file_atomic(dir / "garbage.safetensors", common::Bytes{1, 2, 3}));
    run.twin_moments = dir / "garbage.safetensors";
    auto garbage = client::run_work_unit(twin, model, shards, run);
    REQUIRE_FALSE(garbage);
    CHECK(garbage.message().find("the moments to resume") == 0);
    CHECK(own.steps == own_before.steps);
}

TEST_CASE("a volunteer that names a task in --tasks works on that task alone") {
    TestServer server;
    set_to_wall_clock(server);
    auto first = server.config().task_id;
    auto second = server.config();
    second.task_id = "second";
    REQUIRE(create_task(server.state(), server.store(), second).ok());
    REQUIRE(server.app().refresh_tasks().ok());
    REQUIRE(server.store().set_task_weight(first, 100).ok());  // without the choice, nearly always the first
    TempDir dir;
    auto options = options_for(server.port(), dir / "volunteer");
    options.once = true;
    options.preferences.tasks.only = {"second"};
    for (int run = 0; run < 2; ++run) {
        client::VolunteerControl control;
        auto stop = client::run_volunteer(options, control);
        INFO(stop.message);
        REQUIRE(stop.reason == StopReason::OnceDone);
        server.app().wait_idle();
    }
    CHECK(server.store().task("second").value()->version == 2);
    CHECK(server.store().task(first).value()->version == 0);
}

TEST_CASE(
    "a volunteer of a kept-state task keeps its optimizer moments in its state directory across restarts, and sends "
    "the moments a unit resumed when its audit asks for them") {
    TestServer server([](TaskConfig& config) {
        config.inner_optimizer = common::InnerOptimizer::Kept;
        config.replication = 0;     // replicated units train afresh
        config.target_seconds = 0;  // every unit H steps
        config.audit = 1;           // every result replayed
    });
    set_to_wall_clock(server);
    const auto steps = server.config().local_steps;
    TempDir dir;
    client::ClientState state(dir / "volunteer");
    // A damaged state file is reported, and the volunteer starts with fresh moments.
    std::filesystem::create_directories(state.root());
    { std::ofstream(state.optimizer_file()) << "not a safetensors file"; }
    auto options = options_for(server.port(), dir / "volunteer");
    options.once = true;
    client::VolunteerControl control;
    auto stop = client::run_volunteer(options, control);
    INFO(stop.message);
    REQUIRE(stop.reason == StopReason::OnceDone);
    auto first = client::load_optimizer_state(state.optimizer_file()).value();
    CHECK(first.task_id == server.config().task_id);
    CHECK(first.model == server.config().model);
    CHECK(first.steps == steps);

    server.app().wait_idle();
    client::VolunteerControl restarted;  // a new process: the moments come from the file
    stop = client::run_volunteer(options, restarted);
    REQUIRE(stop.reason == StopReason::OnceDone);
    auto second = client::load_optimizer_state(state.optimizer_file()).value();
    CHECK(second.steps == 2 * steps);
    REQUIRE(second.exp_avg.size() == first.exp_avg.size());
    CHECK(second.exp_avg[0].values != first.exp_avg[0].values);

    // The second unit resumed the first's moments: its audit asked for them, they were sent and
    // replayed, and the client keeps no copy once the result is decided (the next run's verdict
    // settles the earlier units' copies).
    server.app().wait_idle();
    std::vector<std::string> passed;
    for (const auto& e : server.store().events_after(0, 1000).value())
        if (e.kind == "audit_passed")
            passed.emplace_back(boost::json::parse(e.detail_json).at("assignment_id").as_string());
    REQUIRE(passed.size() == 2);
    client::VolunteerControl third;
    REQUIRE(client::run_volunteer(options, third).reason == StopReason::OnceDone);
    for (const auto& id : passed) CHECK_FALSE(std::filesystem::exists(state.moments_in_file(id)));
}
