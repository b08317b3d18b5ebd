// RunLogRelay: a served run's output (orchestrator/serve/serve_daemon.h), from the pipe its
// `ensembled run` writes stdout and stderr into, to two places: every byte appended to the run's
// log file (<state_dir>/serve.log, kept across the run's restarts), and each complete line to a
// sink (the daemon writes it to its own log as "[run NAME] <line>").
//
// Contract:
//  - Pump() never blocks (the pipe is made non-blocking): the daemon calls it when poll() says
//    the pipe is readable or hung up, and once more after the child has exited.
//  - Nothing written to the pipe is lost: Pump() reads until the pipe is empty, at its end, or
//    `budget` bytes are read. A child's output is all in the pipe once it has exited, so a Pump()
//    after the exit gets all of it; FlushLine() then hands over a last line that has no newline.
//    Programs the child started may hold the pipe open longer: the relay stays open (and relays
//    them) until the pipe's end.
//  - At the pipe's end the relay closes it and hands over a partial last line itself.
//  - The log file gets each chunk before the sink sees its lines. A failed write to it is
//    logged once (spdlog, naming the file) and the lines still go to the sink.
//  - A line longer than kMaxLine bytes goes to the sink in pieces of kMaxLine bytes (the file
//    gets it whole). A trailing '\r' is dropped from what the sink gets.
//  - The relay owns the pipe's read end and the log file's descriptor; both close with it.
// Neither copyable nor movable (the daemon holds it by unique_ptr). Single-threaded.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/base/status.h"

namespace ens {

class RunLogRelay {
 public:
  using LineSink = std::function<void(std::string_view line)>;
  static constexpr size_t kMaxLine = 16384;
  // What one Pump() reads at most when the daemon's loop calls it: a run that writes without
  // pause cannot hold the loop. Default for Pump().
  static constexpr size_t kPumpBudget = size_t{1} << 20;

  // Takes `pipe_fd` (closed here on failure too) and opens `log_file` for appending (created
  // 0600). IOError naming the file when it cannot be opened.
  static StatusOr<std::unique_ptr<RunLogRelay>> Open(int pipe_fd, const std::string& log_file, LineSink sink);
  ~RunLogRelay();
  RunLogRelay(const RunLogRelay&) = delete;
  RunLogRelay& operator=(const RunLogRelay&) = delete;

  // The pipe, for poll(); -1 once it has ended.
  int fd() const { return pipe_fd_; }
  bool ended() const { return pipe_fd_ < 0; }
  const std::string& log_file() const { return log_file_; }

  // Reads what the pipe holds now (see the contract). True once the pipe has ended.
  bool Pump(size_t budget = kPumpBudget);
  // Hands the partial last line (if any) to the sink.
  void FlushLine();

 private:
  RunLogRelay(int pipe_fd, int log_fd, std::string log_file, LineSink sink);
  void Emit(std::string_view line);
  void WriteLog(const char* data, size_t n);

  int pipe_fd_;
  int log_fd_;
  std::string log_file_;
  LineSink sink_;
  std::string partial_;       // the current line, not yet complete
  bool log_failed_ = false;   // a write to log_file_ failed (logged once)
};

}  // namespace ens
