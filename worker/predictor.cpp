#include "worker/predictor.h"

#include "worker/mlp.h"

namespace ens {

StatusOr<std::vector<std::vector<float>>> PredictWithCheckpoints(
    const std::vector<std::string>& checkpoints, const std::vector<float>& rows, int features) {
  int64_t n = features > 0 ? static_cast<int64_t>(rows.size()) / features : 0;
  torch::Tensor x = torch::from_blob(const_cast<float*>(rows.data()), {n, features});
  std::vector<std::vector<float>> out;
  for (const auto& path : checkpoints) {
    auto m = LoadCheckpoint(path);
    if (!m.ok()) return m.status();
    if (m->x_mean.numel() != features)
      return Status::InvalidArgument(path + ": model expects " + std::to_string(m->x_mean.numel()) +
                                     " features, input has " + std::to_string(features));
    torch::Tensor p = m->PredictRaw(x).contiguous();
    out.emplace_back(p.data_ptr<float>(), p.data_ptr<float>() + n);
  }
  return out;
}

StatusOr<nlohmann::json> CompareCheckpoints(const std::string& a, const std::string& b) {
  auto ta = CheckpointTensors(a);
  if (!ta.ok()) return ta.status();
  auto tb = CheckpointTensors(b);
  if (!tb.ok()) return tb.status();
  if (ta->size() != tb->size())
    return nlohmann::json{{"equal", false}, {"tensor", "(layer count)"}, {"max_abs_diff", nullptr}};
  for (size_t i = 0; i < ta->size(); ++i) {
    const auto& [name, x] = (*ta)[i];
    const torch::Tensor& y = (*tb)[i].second;
    if (x.sizes() != y.sizes() || x.dtype() != y.dtype())
      return nlohmann::json{{"equal", false}, {"tensor", name}, {"max_abs_diff", nullptr}};
    // Bitwise: compare the raw bytes, so -0.0 vs 0.0 and NaN payloads count as different.
    torch::Tensor xc = x.contiguous(), yc = y.contiguous();
    if (std::memcmp(xc.data_ptr(), yc.data_ptr(), xc.nbytes()) != 0) {
      double diff = (xc.to(torch::kDouble) - yc.to(torch::kDouble)).abs().max().item<double>();
      return nlohmann::json{{"equal", false}, {"tensor", name}, {"max_abs_diff", diff}};
    }
  }
  return nlohmann::json{{"equal", true}};
}

}  // namespace ens
