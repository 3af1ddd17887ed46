#include "task_choice.h"

#include "comma_separated.h"
#include "protocol.h"

namespace tessera::client {
namespace {

std::string joined(const std::vector<std::string>& names) {
    std::string text;
    for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
    return text;
}

}  // namespace

std::vector<std::string> TaskChoice::describe() const {
    std::vector<std::string> lines;
    if (!only.empty()) lines.push_back("only the tasks " + joined(only));
    if (!exclude.empty()) lines.push_back("never the tasks " + joined(exclude));
    return lines;
}

common::Result<std::vector<std::string>> parse_task_names(const std::string& text) {
    std::vector<std::string> names;
    for (auto& name : comma_separated(text)) {
        if (name.empty()) continue;
        if (!common::is_identifier(name))
            return common::make_error("\"" + name + "\" is not a task id or model preset (1 to 64 of A-Z a-z 0-9 _ -)");
        names.push_back(std::move(name));
    }
    if (names.size() > common::kMaxTaskChoices)
        return common::make_error("at most " + std::to_string(common::kMaxTaskChoices) + " names");
    return names;
}

}  // namespace tessera::client
