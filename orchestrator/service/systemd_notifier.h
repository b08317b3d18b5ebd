// SystemdNotifier: the daemon's side of systemd's notify protocol (sd_notify).
//
// READY=1 once every worker reported ready; STATUS= lines with round progress; STOPPING=1 on
// shutdown; WATCHDOG=1 pings at half of WatchdogSec when the unit sets one. Without
// NOTIFY_SOCKET (not under systemd) every call is a cheap no-op. Workers never see
// NOTIFY_SOCKET (WorkerPool removes it from their environment). Single-threaded.
#pragma once

#include <chrono>
#include <string>

namespace ens {

class SystemdNotifier {
 public:
  SystemdNotifier();
  void Ready();                          // once; later calls do nothing
  void Status(const std::string& text);  // sent only when it changed
  void Stopping();
  void MaybePingWatchdog();              // call from the main loop; rate-limited
  bool ready_sent() const { return ready_; }
  // How often the main loop must call MaybePingWatchdog (WatchdogSec/2) in ms; 0: no watchdog.
  int watchdog_ping_ms() const { return static_cast<int>(watchdog_usec_ / 2000); }

 private:
  bool ready_ = false;
  std::string last_status_;
  uint64_t watchdog_usec_ = 0;
  std::chrono::steady_clock::time_point last_ping_{};
};

}  // namespace ens
