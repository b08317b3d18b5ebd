#include "common/config/recycle_policy.h"

#include <cstdio>

namespace ens {

std::string RecyclePolicy::AfterTask(const ProcessMemory& now) {
  ++tasks_;
  if (tasks_ == 1) first_rss_kb_ = now.rss_kb;
  char why[160];
  if (spec_.after_tasks > 0 && tasks_ >= spec_.after_tasks) {
    std::snprintf(why, sizeof(why), "%d tasks done (recycle.after_tasks)", tasks_);
    return why;
  }
  double rss_mb = static_cast<double>(now.rss_kb) / 1024.0;
  if (spec_.rss_mb > 0 && rss_mb > spec_.rss_mb) {
    std::snprintf(why, sizeof(why), "RSS %.0f MiB > %.0f MiB (recycle.rss_mb)", rss_mb, spec_.rss_mb);
    return why;
  }
  if (spec_.rss_growth_pct > 0 && tasks_ > 1 &&
      now.rss_kb > static_cast<double>(first_rss_kb_) * (1.0 + spec_.rss_growth_pct / 100.0)) {
    std::snprintf(why, sizeof(why), "RSS grew %.1f%% since the first task (recycle.rss_growth_pct %.0f)",
                  100.0 * static_cast<double>(now.rss_kb - first_rss_kb_) / static_cast<double>(first_rss_kb_),
                  spec_.rss_growth_pct);
    return why;
  }
  double gpu_mb = static_cast<double>(now.gpu_reserved_kb) / 1024.0;
  if (spec_.gpu_reserved_mb > 0 && gpu_mb > spec_.gpu_reserved_mb) {
    std::snprintf(why, sizeof(why), "GPU reserved %.0f MiB > %.0f MiB (recycle.gpu_reserved_mb)", gpu_mb,
                  spec_.gpu_reserved_mb);
    return why;
  }
  return "";
}

}  // namespace ens
