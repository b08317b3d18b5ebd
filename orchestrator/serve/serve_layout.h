// ServeLayout: the files `ensembled serve` keeps of its own, every one named here. They live
// under <state_root>/.serve, which no run may have as its state directory:
//
//   .serve/queue.jsonl           the queue journal (serve_journal.h)
//   .serve/configs/<run>.json    each run's effective config, as the daemon starts it
//   .serve/logs/<run>.log        a run's relayed output under run_as "submitter" (the daemon's
//                                file; under "daemon" it is the run's own serve.log, RunLayout)
//   .serve/control.sock          the daemon's control socket, unless service.control_socket or
//                                systemd's RUNTIME_DIRECTORY puts it elsewhere (serve_config.h)
//
// and, in runs_dir, the file a run was submitted as: <runs_dir>/<run>.json. Pure path
// arithmetic; thread-safe.
#pragma once

#include <filesystem>
#include <string>

namespace ens {

// `path` lexically normal and without a trailing slash ("a/b/" and "a/./b" are "a/b"): the
// form two paths are compared in.
inline std::string PlainPath(const std::string& path) {
  std::string p = std::filesystem::path(path).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

// Whether `inner` is `outer` or inside it (both PlainPath'd).
inline bool PathWithin(const std::string& inner, const std::string& outer) {
  const std::string i = PlainPath(inner), o = PlainPath(outer);
  return i == o || (i.size() > o.size() && i.compare(0, o.size(), o) == 0 && (o == "/" || i[o.size()] == '/'));
}

class ServeLayout {
 public:
  explicit ServeLayout(const std::string& state_root) : dir_(state_root + "/.serve") {}

  const std::string& dir() const { return dir_; }
  std::string QueueJournal() const { return dir_ + "/queue.jsonl"; }
  std::string ConfigsDir() const { return dir_ + "/configs"; }
  std::string RunConfig(const std::string& run) const { return ConfigsDir() + "/" + run + ".json"; }
  std::string LogsDir() const { return dir_ + "/logs"; }
  std::string RunLog(const std::string& run) const { return LogsDir() + "/" + run + ".log"; }

  // The file of runs_dir that submits run `run`.
  static std::string SubmittedFile(const std::string& runs_dir, const std::string& run) {
    return runs_dir + "/" + run + ".json";
  }

 private:
  std::string dir_;
};

}  // namespace ens
