#include "common/base/logging.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "common/base/env_vars.h"

namespace ens {
namespace {

// "<N>" syslog priority prefix: journald reads it from a stream and sets PRIORITY=.
class SyslogPriorityFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    dest.append(std::string_view(Prefix(msg.level)));
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<SyslogPriorityFlag>(); }

 private:
  static const char* Prefix(spdlog::level::level_enum l) {
    switch (l) {
      case spdlog::level::critical: return "<2>";
      case spdlog::level::err: return "<3>";
      case spdlog::level::warn: return "<4>";
      case spdlog::level::info: return "<6>";
      default: return "<7>";
    }
  }
};

}  // namespace

bool UnderJournald() { return std::getenv("JOURNAL_STREAM") != nullptr; }

void InitLogging(const std::string& name, const std::string& log_file) {
  auto console = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  if (UnderJournald()) {
    auto f = std::make_unique<spdlog::pattern_formatter>();
    f->add_flag<SyslogPriorityFlag>('*').set_pattern("%*%v");  // journald adds time and unit
    console->set_formatter(std::move(f));
  } else {
    console->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] %v");
  }
  std::vector<spdlog::sink_ptr> sinks{console};
  if (!log_file.empty()) {
    try {
      auto file = std::make_shared<spdlog::sinks::rotating_file_sink_mt>(log_file, 10 * 1024 * 1024, 3);
      file->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] %v");
      sinks.push_back(file);
    } catch (const spdlog::spdlog_ex& e) {
      console->log(spdlog::details::log_msg(name, spdlog::level::warn,
                                            std::string("cannot open log file ") + log_file + ": " + e.what()));
    }
  }
  auto logger = std::make_shared<spdlog::logger>(name, sinks.begin(), sinks.end());
  spdlog::set_default_logger(logger);
  if (const char* lvl = EnvVarValue(EnvVar::kLogLevel)) spdlog::set_level(spdlog::level::from_str(lvl));
  spdlog::flush_on(spdlog::level::info);
}

std::string SelfDir() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : p.parent_path().string();
}

}  // namespace ens
