#include "orchestrator/service/systemd_notifier.h"

#include <systemd/sd-daemon.h>

#include "common/base/env.h"

namespace ens {

SystemdNotifier::SystemdNotifier() {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(/*unset_environment=*/0, &usec) > 0) watchdog_usec_ = usec;
}

void SystemdNotifier::Ready() {
  if (ready_) return;
  ready_ = true;
  sd_notify(0, "READY=1");
}

void SystemdNotifier::Status(const std::string& text) {
  if (text == last_status_) return;
  last_status_ = text;
  sd_notify(0, ("STATUS=" + text).c_str());
}

void SystemdNotifier::Stopping() { sd_notify(0, "STOPPING=1"); }

void SystemdNotifier::MaybePingWatchdog() {
  if (watchdog_usec_ == 0) return;
  auto now = CurrentEnv().SteadyNow();
  if (now - last_ping_ < std::chrono::microseconds(watchdog_usec_ / 2)) return;
  last_ping_ = now;
  sd_notify(0, "WATCHDOG=1");
}

}  // namespace ens
