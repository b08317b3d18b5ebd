#include "common/state/member_result.h"

#include <cmath>
#include <cstring>

#include "common/base/atomic_file.h"
#include "common/state/member_view.h"
#include "common/state/run_layout.h"

namespace ens {

StatusOr<std::vector<float>> ReadFloats(const std::string& path, size_t expected) {
  auto bytes = ReadMemberFile(path);
  if (!bytes.ok()) return bytes.status();
  if (bytes->size() != expected * sizeof(float))
    return Status::Corruption(path + ": holds " + std::to_string(bytes->size() / sizeof(float)) +
                              " values, expected " + std::to_string(expected));
  std::vector<float> v(expected);
  if (expected) std::memcpy(v.data(), bytes->data(), bytes->size());
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      return Status::Corruption(path + ": value " + std::to_string(i) + " is not finite");
  return v;
}

std::string FloatsToBytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

StatusOr<MemberResult> LoadMemberResult(const std::string& member_dir, size_t holdout_rows,
                                        size_t pool_rows) {
  MemberResult r;
  auto metrics = ReadMemberJson(MemberFiles(member_dir).Metrics());
  if (!metrics.ok()) return metrics.status();
  r.metrics = std::move(*metrics);
  // A regressor's score is holdout_rmse, a classifier's holdout_accuracy.
  auto scored = [&](const char* key) { return r.metrics.contains(key) && r.metrics[key].is_number(); };
  if (!r.metrics.is_object() || !(scored("holdout_rmse") || scored("holdout_accuracy")))
    return Status::Corruption(member_dir + "/metrics.json: not a metrics object");
  r.name = r.metrics.value("member", "");
  auto h = ReadFloats(MemberFiles(member_dir).HoldoutPred(), holdout_rows);
  if (!h.ok()) return h.status();
  r.holdout_pred = std::move(*h);
  auto p = ReadFloats(MemberFiles(member_dir).PoolPred(), pool_rows);
  if (!p.ok()) return p.status();
  r.pool_pred = std::move(*p);
  return r;
}

}  // namespace ens
