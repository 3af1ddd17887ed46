// Dashboard: the prompt routes of a text task (docs/dashboard.md, "Prompts"): what it can draw,
// and a prompt's row of samples.
#include "dashboard.h"

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace tessera::server {
namespace {

struct PromptQuery {
    PromptRequest prompt;
    std::int64_t version = 0;  // of the task, whose EMA weights draw it
};

// Why a task draws no prompts, or empty when it does.
std::string prompt_refusal(const TaskView& task, const TaskFacts* facts) {
    const auto& id = task.record.id;
    if (facts == nullptr) return "task '" + id + "' is not served by this process";
    if (task.config.text_dim <= 0)
        return "task '" + id + "' is class-conditional (model " + task.config.model +
               "): its samples are drawn a row per class; prompts need a text task (a -text preset on a captioned "
               "dataset)";
    if (!facts->prompts_error.empty()) return "task '" + id + "' cannot draw prompts: " + facts->prompts_error;
    if (facts->prompts == nullptr || facts->gallery == nullptr || !facts->gallery->draws_prompts())
        return "task '" + id + "' cannot draw images: its dataset has no decoder";
    return "";
}

// The whole of `text` as a number, or nullopt.
std::optional<double> parse_number(std::string_view text) {
    double value = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) return std::nullopt;
    return value;
}
std::optional<std::int64_t> parse_integer(std::string_view text, std::int64_t max) {
    std::int64_t value = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || value < 0 || value > max) return std::nullopt;
    return value;
}

Response bad_request(const Request& request, const std::string& code, const std::string& message) {
    return error_response(request, http::status::bad_request, code, message);
}

// The query of a prompt's row: ?prompt=WORDS or ?caption=N, &cfg=G, &seed=S, &version=V (a
// client that asks again pins the version it first saw, so a run that merges faster than a
// drawing takes still gets its image). A 400 answer when it is malformed.
std::variant<PromptQuery, Response> parse_prompt_query(const Request& request, std::int64_t newest) {
    auto target = request.target();
    PromptQuery query{{}, newest};
    auto& prompt = query.prompt;
    auto text = query_text(target, "prompt");
    auto caption = query_text(target, "caption");
    if (text.has_value() == caption.has_value())
        return bad_request(request, "bad_prompt",
                           "give one of ?prompt=WORDS (typed) and ?caption=N (a listed caption)");
    if (text) {
        if (text->size() > kMaxPromptBytes)
            return bad_request(request, "bad_prompt",
                               "a prompt holds at most " + std::to_string(kMaxPromptBytes) + " bytes");
        prompt.text = std::move(*text);
    } else {
        auto index = parse_integer(*caption, std::numeric_limits<std::int32_t>::max());
        if (!index) return bad_request(request, "bad_prompt", "caption must be the index of a listed caption");
        prompt.caption = *index;
    }
    if (auto cfg = query_text(target, "cfg")) {
        auto value = parse_number(*cfg);
        if (!value || *value < kMinPromptGuidance || *value > kMaxPromptGuidance)
            return bad_request(request, "bad_cfg",
                               "cfg (the guidance scale) must be a number from " +
                                   std::to_string(static_cast<int>(kMinPromptGuidance)) + " to " +
                                   std::to_string(static_cast<int>(kMaxPromptGuidance)));
        prompt.guidance = *value;
    }
    if (auto seed = query_text(target, "seed")) {
        auto value = parse_integer(*seed, common::kMaxSafeInteger);
        if (!value) return bad_request(request, "bad_seed", "seed must be a whole number from 0 to 2^53 - 1");
        prompt.seed = static_cast<std::uint64_t>(*value);
    }
    if (auto pinned = query_text(target, "version")) {
        auto value = parse_integer(*pinned, newest);
        if (!value)
            return bad_request(request, "bad_version",
                               "version must be a version of the task, 0 to " + std::to_string(newest));
        query.version = *value;
    }
    return query;
}

// 202 while the row is drawn or waits its turn, with when to ask again.
Response drawing_response(const Request& request, const PromptStatus& status, std::int64_t version) {
    auto retry = static_cast<std::int64_t>(std::ceil(std::max(1.0, status.retry_after_s)));
    boost::json::object body{
        {"state", status.drawing ? "drawing" : "waiting"}, {"version", version}, {"retry_after_s", retry}};
    http::response<http::string_body> response{http::status::accepted, request.version()};
    response.set(http::field::server, "tessera-server");
    response.set(http::field::content_type, "application/json");
    response.set(http::field::cache_control, "no-store");
    response.set(http::field::retry_after, std::to_string(retry));
    response.keep_alive(request.keep_alive());
    response.body() = boost::json::serialize(body) + "\n";
    response.prepare_payload();
    return response;
}

Response png_response(const Request& request, const common::Bytes& png, std::int64_t version) {
    http::response<http::vector_body<std::uint8_t>> response{http::status::ok, request.version()};
    response.set(http::field::server, "tessera-server");
    response.set(http::field::content_type, "image/png");
    response.set(http::field::cache_control, "no-cache");
    response.set("X-Tessera-Version", std::to_string(version));
    response.keep_alive(request.keep_alive());
    if (request.method() == http::verb::get) response.body().assign(png.begin(), png.end());
    response.prepare_payload();
    if (request.method() == http::verb::head) response.content_length(png.size());
    return response;
}

}  // namespace

// What prompts the task can draw: its captions, the encoder's words and the guidance range.
Response Dashboard::prompts(const Request& request, const std::string& task_id) {
    auto found = task_of(request, task_id);
    if (auto* response = std::get_if<Response>(&found)) return std::move(*response);
    auto& task = std::get<std::optional<TaskView>>(found);
    boost::json::object body{
        {"available", false},
        {"typed", false},
        {"message", "no task"},
        {"version", nullptr},
        {"vocabulary", boost::json::array()},
        {"captions", boost::json::array()},
        {"samples", kPromptSamples},
        {"guidance",
         {{"min", kMinPromptGuidance}, {"max", kMaxPromptGuidance}, {"default", PromptRequest{}.guidance}}}};
    if (!task) return json_response(request, http::status::ok, body);
    body["version"] = task->record.version;
    auto facts = task_facts_(task->record.id);
    if (auto why = prompt_refusal(*task, facts.get()); !why.empty()) {
        body["message"] = why;
        return json_response(request, http::status::ok, body);
    }
    const auto& book = *facts->prompts;
    boost::json::array vocabulary, captions;
    for (const auto& word : book.vocabulary()) vocabulary.emplace_back(word);
    for (std::size_t i = 0; i < book.captions().size(); ++i)
        captions.push_back({{"index", i}, {"text", book.captions()[i].text}, {"split", book.captions()[i].split}});
    bool typed = !book.vocabulary().empty();
    body["available"] = true;
    body["typed"] = typed;
    body["message"] = typed
                          ? "type a prompt in the stand-in text encoder's words, or pick one of the dataset's captions"
                          : "this dataset ships no stand-in text encoder: its captions were embedded outside Tessera "
                            "(T5 or CLIP, which cannot run in the server), so only its own captions can be drawn";
    body["vocabulary"] = std::move(vocabulary);
    body["captions"] = std::move(captions);
    return json_response(request, http::status::ok, body);
}

// A prompt's row of samples from the EMA weights: the PNG once drawn, 202 until then.
Response Dashboard::prompt_image(const Request& request, const std::string& task_id) {
    auto found = task_of(request, task_id);
    if (auto* response = std::get_if<Response>(&found)) return std::move(*response);
    auto& task = std::get<std::optional<TaskView>>(found);
    if (!task) return error_response(request, http::status::not_found, "not_found", "no task to draw from");
    auto facts = task_facts_(task->record.id);
    if (auto why = prompt_refusal(*task, facts.get()); !why.empty())
        return error_response(request, http::status::conflict,
                              task->config.text_dim <= 0 ? "not_a_text_task" : "no_prompts", why);
    auto parsed = parse_prompt_query(request, task->record.version);
    if (auto* response = std::get_if<Response>(&parsed)) return std::move(*response);
    const auto& query = std::get<PromptQuery>(parsed);
    auto key = facts->prompts->key_of(query.prompt);
    if (!key) return bad_request(request, "bad_prompt", key.message());
    auto status = facts->gallery->prompt(query.version, query.prompt, *key);
    if (!status.error.empty())
        return error_response(request, http::status::internal_server_error, "sampling_failed", status.error);
    if (!status.image) return drawing_response(request, status, query.version);
    return png_response(request, *status.image, query.version);
}

}  // namespace tessera::server
