// What the volunteer tells its user: a line of text per event on stdout (errors on stderr),
// or, with --json-logs, one JSON object per line with the event's name, text, time and
// fields. A client attached to several servers names the server its lines are about ("[host:port]"
// before the text; a "server" field in JSON). Safe to call from several threads (the heartbeat
// thread logs too).
#pragma once

#include <boost/json/object.hpp>

#include <string>

namespace tessera::client {

class Logger {
public:
    Logger(bool quiet, bool json, std::string source = "")
        : quiet_(quiet), json_(json), source_(std::move(source)) {}

    void info(const std::string& event, const std::string& text, boost::json::object fields = {}) const;
    void error(const std::string& text) const;
    // True when progress bars would get in the way (quiet or JSON output).
    bool quiet() const { return quiet_ || json_; }

private:
    bool quiet_;
    bool json_;
    std::string source_;  // empty: the only server
};

}  // namespace tessera::client
