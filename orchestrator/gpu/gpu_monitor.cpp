#include "orchestrator/gpu/gpu_monitor.h"

namespace ens {

GpuMonitor::GpuMonitor(std::unique_ptr<Nvml> nvml, GpuInventory inventory)
    : nvml_(std::move(nvml)), inventory_(std::move(inventory)), history_mb_(inventory_.gpus.size()) {}

void GpuMonitor::MaybeSample(Clock::time_point now, bool force) {
  if (!nvml_ || inventory_.gpus.empty()) return;
  if (!force && last_ != Clock::time_point{} && now - last_ < kGpuSampleInterval) return;
  last_ = now;
  // NVML lists GPUs in its own order; the inventory is in PCI order: match by UUID.
  std::vector<NvmlSample> raw = nvml_->Sample();
  latest_.assign(inventory_.gpus.size(), NvmlSample{});
  for (size_t i = 0; i < inventory_.gpus.size(); ++i)
    for (auto& r : raw)
      if (r.uuid == inventory_.gpus[i].uuid) latest_[i] = std::move(r);
  history_s_.push_back(std::chrono::duration<double>(now - started_).count());
  for (size_t i = 0; i < latest_.size(); ++i)
    history_mb_[i].push_back(latest_[i].uuid.empty() ? -1 : latest_[i].memory_used_bytes / 1048576.0);
  if (history_s_.size() > kGpuHistorySamples) {
    history_s_.pop_front();
    for (auto& h : history_mb_) h.pop_front();
  }
}

GpuReadings GpuMonitor::Read() const {
  GpuReadings out;
  out.source = inventory_.source;
  for (size_t i = 0; i < inventory_.gpus.size(); ++i) {
    const DiscoveredGpu& g = inventory_.gpus[i];
    GpuView v;
    v.index = g.index;
    v.uuid = g.uuid;
    v.name = g.name;
    if (g.memory_total_bytes > 0) v.memory_total_mb = g.memory_total_bytes / 1048576.0;
    if (i < latest_.size() && !latest_[i].uuid.empty()) {
      const NvmlSample& r = latest_[i];
      v.memory_used_mb = r.memory_used_bytes / 1048576.0;
      v.memory_total_mb = r.memory_total_bytes / 1048576.0;
      v.utilization_pct = r.utilization_pct;
      v.temperature_c = r.temperature_c;
      v.power_w = r.power_w;
      for (const NvmlProcess& p : r.processes) out.process_mb[static_cast<pid_t>(p.pid)] += p.used_bytes / 1048576.0;
    }
    out.gpus.push_back(std::move(v));
  }
  out.history_s.assign(history_s_.begin(), history_s_.end());
  for (const auto& h : history_mb_) out.history_mb.emplace_back(h.begin(), h.end());
  return out;
}

}  // namespace ens
