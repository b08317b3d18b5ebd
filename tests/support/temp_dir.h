// Test support: a private temporary directory and whole-file text helpers. Header-only;
// used by unit and integration tests alike (it starts no process). Not thread-safe.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace ens::testing {

// A directory under /tmp removed with everything in it when the object dies.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/ensembled-test-XXXXXX";
    const char* made = ::mkdtemp(tmpl);
    if (made == nullptr) throw std::runtime_error("mkdtemp /tmp/ensembled-test-XXXXXX failed");
    path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }
  std::string File(const std::string& name) const { return *this / name; }
  // Writes `content` byte for byte to <dir>/<name>; returns that path.
  std::string Write(const std::string& name, const std::string& content) const {
    const std::string p = File(name);
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }

 private:
  std::string path_;
};

inline void WriteText(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace ens::testing
