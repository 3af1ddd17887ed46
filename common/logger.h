// What a program tells its operator or its user: a line of text per event (information on
// standard output, warnings and errors on standard error after the program's name), or, with
// --json-logs, one JSON object per line on standard output with the event's name, level, text,
// time and fields. A client attached to several servers names the server its lines are about
// ("[host:port]" before the text; a "server" field in JSON). Safe to call from several threads.
#pragma once

#include <boost/json/object.hpp>

#include <string>

namespace tessera::common {

enum class LogLevel { Info, Warning, Error };

class Logger {
public:
    // `program` starts each warning and error line ("tessera-server: ..."). Text information
    // goes to standard output, or to standard error as warnings do when `info_on_stderr` (a
    // server's stages: its standard output says only where it listens and when it stops).
    enum class InfoStream { Stdout, Stderr };
    Logger(std::string program, bool quiet, bool json, std::string source = "",
           InfoStream info_stream = InfoStream::Stdout)
        : program_(std::move(program)), quiet_(quiet), json_(json), source_(std::move(source)),
          info_stream_(info_stream) {}

    // `quiet` silences information, never warnings or errors.
    void info(const std::string& event, const std::string& text, boost::json::object fields = {}) const;
    void warning(const std::string& event, const std::string& text, boost::json::object fields = {}) const;
    void error(const std::string& event, const std::string& text, boost::json::object fields = {}) const;
    void error(const std::string& text) const { error("error", text); }
    // True when progress bars would get in the way (quiet or JSON output).
    bool quiet() const { return quiet_ || json_; }

private:
    void write(LogLevel level, const std::string& event, const std::string& text, boost::json::object fields) const;

    std::string program_;
    bool quiet_;
    bool json_;
    std::string source_;  // empty: the only server
    InfoStream info_stream_;
};

// The process's logger, for code that is not handed one (the server's stages): set once by
// main before any thread starts; until then text lines under the name "tessera".
const Logger& process_log();
void set_process_log(const Logger& logger);

}  // namespace tessera::common
