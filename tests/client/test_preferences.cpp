// The volunteer's preferences: time windows and program names parsed (and bad ones refused
// with what is wrong), each rule of reason_to_wait, the Linux sensors over a fake root and
// over the real /proc, and the watcher that holds work while a preference says wait.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <mutex>

#include "machine_sensors.h"
#include "polling.h"
#include "preference_watcher.h"
#include "temp_dir.h"
#include "time_windows.h"
#include "work_preferences.h"

using namespace tessera;
using namespace tessera::client;
using tessera::testing::TempDir;

namespace {

constexpr int at(int hour, int minute) { return hour * 60 + minute; }

void write_text(const std::filesystem::path& file, const std::string& text) {
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text << "\n";
}

// A file whose last access was `seconds_ago`, as a terminal that was last typed on then.
void touch_accessed(const std::filesystem::path& file, double seconds_ago) {
    write_text(file, "");
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    timespec times[2] = {{now.tv_sec - static_cast<time_t>(seconds_ago), now.tv_nsec}, now};
    REQUIRE(utimensat(AT_FDCWD, file.c_str(), times, 0) == 0);
}

// Sensors a test sets by hand; counts how often they were read.
class HandSetSensors : public MachineSensors {
public:
    MachineState read(const WorkPreferences&) override {
        std::lock_guard lock(mutex_);
        ++reads;
        return state;
    }
    void set_on_battery(bool on) {
        std::lock_guard lock(mutex_);
        state.on_battery = on;
    }
    MachineState state;
    std::atomic<int> reads{0};

private:
    std::mutex mutex_;
};

}  // namespace

TEST_CASE("work hours: windows parse, cross midnight, and a bad one is refused with what is wrong") {
    auto night = parse_time_windows("22:00-07:00").value();
    REQUIRE(night.size() == 1);
    CHECK(within_windows(night, at(23, 0)));
    CHECK(within_windows(night, at(6, 59)));
    CHECK_FALSE(within_windows(night, at(7, 0)));
    CHECK_FALSE(within_windows(night, at(12, 0)));
    CHECK(within_windows(night, at(22, 0)));

    auto two = parse_time_windows(" 9:00-12:00 , 13:30-17:00").value();
    REQUIRE(two.size() == 2);
    CHECK(within_windows(two, at(9, 0)));
    CHECK_FALSE(within_windows(two, at(12, 0)));
    CHECK_FALSE(within_windows(two, at(13, 0)));
    CHECK(within_windows(two, at(16, 59)));
    CHECK(describe_windows(two) == "09:00-12:00, 13:30-17:00");

    CHECK(parse_time_windows("").value().empty());
    CHECK(within_windows({}, at(3, 0)));  // no windows: any time
    CHECK(within_windows(parse_time_windows("08:00-08:00").value(), at(3, 0)));  // the whole day

    for (const std::string bad : {"25:00-07:00", "22:00", "a-b", "22:00-07:60", "22-07", "22:00-07:00,", "-07:00",
                                  "2200-0700", "22:00-07:00-08:00"}) {
        auto parsed = parse_time_windows(bad);
        INFO(bad);
        REQUIRE_FALSE(parsed);
        CHECK(parsed.message().find("is not a window") != std::string::npos);
    }
    CHECK(parse_time_windows("25:00-07:00").message().find("\"25:00-07:00\"") != std::string::npos);
}

TEST_CASE("exclusive apps: names parse; a path or a name Linux would cut is refused") {
    auto names = parse_program_names("steam, blender,,").value();
    CHECK(names == std::vector<std::string>{"steam", "blender"});
    CHECK(parse_program_names("").value().empty());
    auto path = parse_program_names("/usr/bin/steam");
    REQUIRE_FALSE(path);
    CHECK(path.message().find("not its path") != std::string::npos);
    auto long_name = parse_program_names("a-very-long-game-name");
    REQUIRE_FALSE(long_name);
    CHECK(long_name.message().find("15 characters") != std::string::npos);
}

TEST_CASE("the task choice: names parse, a name no server can have is refused, status says what is chosen") {
    CHECK(parse_task_names(" fashion-mnist-dit-tiny, cnn ,").value() ==
          std::vector<std::string>{"fashion-mnist-dit-tiny", "cnn"});
    CHECK(parse_task_names("").value().empty());
    auto spaced = parse_task_names("dit tiny");
    REQUIRE_FALSE(spaced);
    CHECK(spaced.message().find("not a task id or model preset") != std::string::npos);
    std::string many;
    for (int i = 0; i < 65; ++i) many += "t" + std::to_string(i) + ",";
    CHECK(parse_task_names(many).message().find("at most 64") != std::string::npos);

    WorkPreferences preferences;
    preferences.run_on_battery = true;
    CHECK(preferences.describe().empty());  // any task, any time
    preferences.tasks = {{"cnn"}, {"fashion-mnist-dit-b"}};
    CHECK(preferences.describe() ==
          std::vector<std::string>{"only the tasks cnn", "never the tasks fashion-mnist-dit-b"});
}

TEST_CASE("reason_to_wait: each preference holds work, and says why; none holds by default but the battery") {
    WorkPreferences defaults;
    MachineState idle_machine;
    CHECK_FALSE(reason_to_wait(defaults, idle_machine));
    CHECK(defaults.describe() == std::vector<std::string>{"not on battery"});

    MachineState machine;
    machine.on_battery = true;
    CHECK(reason_to_wait(defaults, machine) == "on battery");
    WorkPreferences on_battery_too;
    on_battery_too.run_on_battery = true;
    CHECK_FALSE(reason_to_wait(on_battery_too, machine));
    CHECK(on_battery_too.describe().empty());

    WorkPreferences nights;
    nights.work_hours = parse_time_windows("22:00-07:00").value();
    MachineState noon;
    noon.minute_of_day = at(12, 0);
    CHECK(reason_to_wait(nights, noon) == "outside the work hours (22:00-07:00)");
    noon.minute_of_day = at(23, 30);
    CHECK_FALSE(reason_to_wait(nights, noon));

    WorkPreferences games;
    games.exclusive_apps = {"steam", "blender"};
    MachineState playing;
    playing.programs = {"bash", "blender"};
    CHECK(reason_to_wait(games, playing) == "blender is running");
    playing.programs = {"bash", "steamwebhelper"};
    CHECK_FALSE(reason_to_wait(games, playing));  // names match whole
    CHECK(games.describe().back() == "not while steam, blender runs");

    WorkPreferences idle_first;
    idle_first.idle_minutes = 10;
    MachineState active;
    active.user_idle_s = 150;
    CHECK(reason_to_wait(idle_first, active) == "the user is active (idle less than 10 min)");
    active.user_idle_s = 300;  // the same text while it lasts: the watcher logs a change once
    CHECK(reason_to_wait(idle_first, active) == "the user is active (idle less than 10 min)");
    active.user_idle_s = 600;
    CHECK_FALSE(reason_to_wait(idle_first, active));
    active.user_idle_s.reset();  // no way to tell: work
    CHECK_FALSE(reason_to_wait(idle_first, active));
    CHECK(idle_first.describe().front() == "only after the user has been idle 10 min");
}

TEST_CASE("the Linux sensors read batteries, programs and terminals under a root") {
    TempDir root;
    SystemSensors sensors(root.path());
    CHECK_FALSE(sensors.on_battery());  // no power_supply folder at all
    write_text(root / "sys/class/power_supply/AC/type", "Mains");
    write_text(root / "sys/class/power_supply/AC/online", "1");
    write_text(root / "sys/class/power_supply/BAT0/type", "Battery");
    write_text(root / "sys/class/power_supply/BAT0/status", "Charging");
    CHECK_FALSE(sensors.on_battery());
    write_text(root / "sys/class/power_supply/BAT0/status", "Discharging");
    CHECK(sensors.on_battery());

    write_text(root / "proc/1/comm", "systemd");
    write_text(root / "proc/4242/comm", "steam");
    write_text(root / "proc/self/comm", "not-a-pid");  // only numbered folders are processes
    std::filesystem::create_directories(root / "proc/4243");  // exited: no comm
    CHECK(sensors.running_programs() == std::set<std::string>{"systemd", "steam"});

    CHECK_FALSE(sensors.user_idle_seconds());  // no terminals: no way to tell
    touch_accessed(root / "dev/pts/0", 600);
    touch_accessed(root / "dev/tty2", 120);
    touch_accessed(root / "dev/ttyS0", 1);  // a serial line, not a terminal someone types on
    touch_accessed(root / "dev/pts/ptmx", 1);
    auto idle = sensors.user_idle_seconds();
    REQUIRE(idle);
    CHECK(*idle >= 119);
    CHECK(*idle < 130);

    WorkPreferences preferences;  // reads only what is asked for
    auto machine = sensors.read(preferences);
    CHECK(machine.on_battery);
    CHECK(machine.programs.empty());
    CHECK_FALSE(machine.user_idle_s);
    preferences.exclusive_apps = {"steam"};
    preferences.idle_minutes = 1;
    machine = sensors.read(preferences);
    CHECK(machine.programs.count("steam") == 1);
    CHECK(machine.user_idle_s);
    CHECK(machine.minute_of_day >= 0);
    CHECK(machine.minute_of_day < 1440);
}

TEST_CASE("the Linux sensors see this test among the machine's running programs") {
    std::string own_name;
    std::getline(std::ifstream("/proc/self/comm"), own_name);
    REQUIRE_FALSE(own_name.empty());
    CHECK(SystemSensors().running_programs().count(own_name) == 1);
}

TEST_CASE("the watcher holds work from its first reading, and lets it go when the preference no longer says wait") {
    auto sensors = std::make_shared<HandSetSensors>();
    sensors->set_on_battery(true);
    std::mutex mutex;
    std::vector<std::string> changes;
    auto record = [&](const std::optional<std::string>& reason) {
        std::lock_guard lock(mutex);
        changes.push_back(reason.value_or("work"));
    };
    PreferenceWatcher watcher(WorkPreferences{}, sensors, std::chrono::milliseconds(10), record);
    CHECK(watcher.holding());  // before the constructor returned
    CHECK(sensors->reads >= 1);
    sensors->set_on_battery(false);
    REQUIRE(testing::wait_for([&] { return !watcher.holding(); }, std::chrono::seconds(10)));
    auto reads = sensors->reads.load();
    REQUIRE(testing::wait_for([&] { return sensors->reads > reads + 2; }, std::chrono::seconds(10)));
    std::lock_guard lock(mutex);
    CHECK(changes == std::vector<std::string>{"on battery", "work"});  // told of changes only
}
