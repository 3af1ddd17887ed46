// The dashboard's prompts over loopback (docs/dashboard.md, "Prompts"): a dit-tiny-text task on
// captioned canvases made by `tessera-data prepare canvases` draws a row of samples for a typed
// prompt and for a listed caption, from real LibTorch sampling; an unknown word is refused
// naming it; a dataset without the stand-in encoder draws only its own captions; a class task
// refuses prompts.
#include <doctest/doctest.h>

#include <fstream>
#include <thread>

#include "server_fixture.h"
#include "shell_run.h"
#include "torch_prompts.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

constexpr std::uint32_t kCanvasSide = 64;
constexpr auto kRowWidth = static_cast<std::uint32_t>(kPromptSamples) * kCanvasSide;  // a row of samples

// A small canvases dataset, made once for the whole binary (about 5 s).
const std::filesystem::path& canvases() {
    static TempDir dir;
    static const std::filesystem::path data = [] {
        auto out = dir / "canvases";
        auto made =
            run_tool("prepare canvases --out " + out.string() + " --limit 120 --autoencoder-steps 5 --threads 1");
        if (made.status != 0) throw std::runtime_error("prepare canvases: " + made.output);
        return out;
    }();
    return data;
}

// The same dataset as an import without a stand-in encoder would be (captions embedded elsewhere).
std::filesystem::path without_encoder(const TempDir& dir) {
    auto out = dir / "imported";
    std::filesystem::copy(canvases(), out);
    std::filesystem::remove(out / "text_encoder.safetensors");
    std::ifstream in(out / "dataset.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto manifest = boost::json::parse(text).as_object();
    manifest.erase("text_encoder");
    std::ofstream(out / "dataset.json", std::ios::trunc) << boost::json::serialize(manifest);
    return out;
}

std::function<void(TaskConfig&)> text_task_on(std::filesystem::path data) {
    return [data = std::move(data)](TaskConfig& config) {
        config = small_task_config(data, PolicyKind::FedAsync, "dit-tiny-text");
    };
}

boost::json::object get_json(TestServer& server, const std::string& target) {
    auto reply = http_get(server.port(), target);
    if (reply.status != 200)
        throw std::runtime_error(target + ": HTTP " + std::to_string(reply.status) + " " + reply.body);
    return boost::json::parse(reply.body).as_object();
}

// Asks until the row is drawn (202 while it is drawn or waits for the pause after the last).
HttpReply drawn(TestServer& server, const std::string& target) {
    for (int attempt = 0; attempt < 600; ++attempt) {
        auto reply = http_get(server.port(), target);
        if (reply.status != 202) return reply;
        auto body = boost::json::parse(reply.body).as_object();
        CHECK(reply.headers["retry-after"].size() > 0);
        CHECK((body.at("state").as_string() == "drawing" || body.at("state").as_string() == "waiting"));
        server.app().wait_idle();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    throw std::runtime_error(target + ": not drawn in 60 s");
}

std::uint32_t png_field(const std::string& png, std::size_t at) {
    std::uint32_t value = 0;
    for (std::size_t i = 0; i < 4; ++i) value = value << 8 | static_cast<std::uint8_t>(png[at + i]);
    return value;
}

// A PNG's width and height from its IHDR chunk.
std::pair<std::uint32_t, std::uint32_t> png_size(const std::string& png) {
    REQUIRE(png.size() > 24);
    REQUIRE(png.substr(1, 3) == "PNG");
    return {png_field(png, 16), png_field(png, 20)};
}

}  // namespace

TEST_CASE("a text task draws a typed prompt and a listed caption; an unknown word is refused by name") {
    TestServer server(text_task_on(canvases()));
    auto book = get_json(server, "/api/v1/prompts");
    CHECK(book.at("available").as_bool());
    CHECK(book.at("typed").as_bool());
    CHECK(book.at("samples").as_int64() == kPromptSamples);
    CHECK(book.at("guidance").at("min").as_double() == 1.0);
    const auto& words = book.at("vocabulary").as_array();
    CHECK(std::find(words.begin(), words.end(), boost::json::value("bag")) != words.end());
    const auto& captions = book.at("captions").as_array();
    REQUIRE(captions.size() == 2 * kPromptCaptionsPerSplit);  // 20 validation and 20 held-out canvases
    CHECK(captions[0].at("split").as_string() == "validation");
    CHECK(captions[kPromptCaptionsPerSplit].at("split").as_string() == "heldout");
    CHECK(captions[0].at("text").as_string().starts_with("a "));

    const std::string typed = "/api/v1/prompt.png?prompt=a+dark+bag+left+of+a+light+top&cfg=4&seed=7";
    auto first = drawn(server, typed);
    REQUIRE_MESSAGE(first.status == 200, first.body);
    CHECK(first.headers["content-type"] == "image/png");
    CHECK(first.headers["x-tessera-version"] == "0");
    CHECK(png_size(first.body) == std::pair<std::uint32_t, std::uint32_t>(kRowWidth, kCanvasSide));
    // Kept: asked again (the same words however spelled), it comes back at once, the same bytes.
    auto again =
        http_get(server.port(), "/api/v1/prompt.png?prompt=A%20dark%20bag%20left%20of%20a%20light%20top.&cfg=4&seed=7");
    REQUIRE(again.status == 200);
    CHECK(again.body == first.body);
    // Another seed is other noise; the task's own route draws the same.
    auto task_id = server.store().current_task().value()->id;
    auto reseeded =
        drawn(server, "/api/v1/tasks/" + task_id + "/prompt.png?prompt=a+dark+bag+left+of+a+light+top&cfg=4&seed=8");
    REQUIRE(reseeded.status == 200);
    CHECK(reseeded.body != first.body);

    auto caption = drawn(server, "/api/v1/prompt.png?caption=" + std::to_string(kPromptCaptionsPerSplit) + "&cfg=2");
    REQUIRE_MESSAGE(caption.status == 200, caption.body);
    CHECK(png_size(caption.body).first == kRowWidth);

    auto unknown = http_get(server.port(), "/api/v1/prompt.png?prompt=a+purple+bag+left+of+a+top");
    CHECK(unknown.status == 400);
    auto refusal = boost::json::parse(unknown.body).as_object();
    CHECK(refusal.at("error").as_string() == "bad_prompt");
    CHECK(std::string(refusal.at("message").as_string()).find("\"purple\"") != std::string::npos);

    CHECK(http_get(server.port(), "/api/v1/prompt.png?prompt=a+bag&cfg=0.5").status == 400);
    CHECK(http_get(server.port(), "/api/v1/prompt.png?prompt=a+bag&cfg=x").status == 400);
    CHECK(http_get(server.port(), "/api/v1/prompt.png?prompt=a+bag&seed=-1").status == 400);
    CHECK(http_get(server.port(), "/api/v1/prompt.png?prompt=a+bag&version=1").status == 400);  // not merged yet
    CHECK(http_get(server.port(), "/api/v1/prompt.png?caption=999").status == 400);
    CHECK(http_get(server.port(), "/api/v1/prompt.png?cfg=3").status == 400);  // neither prompt nor caption
    CHECK(http_get(server.port(), "/api/v1/prompt.png?prompt=a+bag&caption=1").status == 400);
    CHECK(http_get(server.port(), "/api/v1/prompt.png?prompt=" + std::string(600, 'a')).status == 400);
    CHECK(http_get(server.port(), "/api/v1/tasks/nope/prompt.png?prompt=a+bag").status == 404);
}

TEST_CASE("a dataset without the stand-in text encoder draws only its own captions") {
    TempDir dir;
    TestServer server(text_task_on(without_encoder(dir)));
    auto book = get_json(server, "/api/v1/prompts");
    CHECK(book.at("available").as_bool());
    CHECK_FALSE(book.at("typed").as_bool());
    CHECK(book.at("vocabulary").as_array().empty());
    CHECK(std::string(book.at("message").as_string()).find("only its own captions") != std::string::npos);
    CHECK(book.at("captions").as_array().size() == 2 * kPromptCaptionsPerSplit);

    auto typed = http_get(server.port(), "/api/v1/prompt.png?prompt=a+bag+left+of+a+top");
    CHECK(typed.status == 400);
    CHECK(typed.body.find("no stand-in text encoder") != std::string::npos);
    auto caption = drawn(server, "/api/v1/prompt.png?caption=3");
    REQUIRE_MESSAGE(caption.status == 200, caption.body);
    CHECK(png_size(caption.body).first == kRowWidth);
}

TEST_CASE("a class task refuses prompts and says why") {
    TestServer server;  // dit-tiny, class-conditional
    auto book = get_json(server, "/api/v1/prompts");
    CHECK_FALSE(book.at("available").as_bool());
    CHECK(std::string(book.at("message").as_string()).find("class-conditional") != std::string::npos);
    auto refused = http_get(server.port(), "/api/v1/prompt.png?prompt=a+bag");
    CHECK(refused.status == 409);
    auto body = boost::json::parse(refused.body).as_object();
    CHECK(body.at("error").as_string() == "not_a_text_task");
    CHECK(std::string(body.at("message").as_string()).find("class-conditional") != std::string::npos);
}
