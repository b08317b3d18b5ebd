#include "common/logging.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace ens {

void InitLogging(const std::string& name) {
  auto logger = spdlog::stderr_logger_mt(name);
  if (std::getenv("JOURNAL_STREAM")) logger->set_pattern("<%l> %v");
  else logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] %v");
  spdlog::set_default_logger(logger);
  if (const char* lvl = std::getenv("ENSEMBLED_LOG_LEVEL")) spdlog::set_level(spdlog::level::from_str(lvl));
}

std::string SelfDir() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : p.parent_path().string();
}

}  // namespace ens
