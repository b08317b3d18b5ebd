#include "worker/predict/predictor.h"

#include <optional>

#include "common/base/fd_io.h"
#include "worker/predict/checkpoint.h"
#include "worker/models/script_model.h"

namespace ens {

namespace {

// A member as predict runs it: a lane member's parts (checkpoint.h LoadLaneMemberParts: the
// kernel, no TorchScript interpreter), any other member's module; the same bits either way.
struct PredictingMember {
  std::optional<MemberParts> parts;
  std::optional<torch::jit::Module> module;

  int64_t Features() const { return parts ? parts->x_mean.numel() : MemberFeatures(*module); }
  std::vector<float> Predict(const torch::Tensor& x) { return parts ? PredictRows(*parts, x) : PredictRows(*module, x); }
};

// The members of `checkpoints`, each checked to take `features` columns.
StatusOr<std::vector<PredictingMember>> LoadMembers(const std::vector<std::string>& checkpoints, int features) {
  std::vector<PredictingMember> members;
  for (const auto& path : checkpoints) {
    PredictingMember m;
    auto parts = LoadLaneMemberParts(path);
    if (!parts.ok()) return parts.status();
    m.parts = std::move(*parts);
    if (!m.parts) {
      auto module = LoadMember(path);
      if (!module.ok()) return module.status();
      m.module = std::move(*module);
    }
    if (m.Features() != features)
      return Status::InvalidArgument(path + ": model expects " + std::to_string(m.Features()) +
                                     " features, input has " + std::to_string(features));
    members.push_back(std::move(m));
  }
  return members;
}

}  // namespace

void ComputeOnOneThread() {
  torch::set_num_threads(1);
  torch::set_num_interop_threads(1);
}

StatusOr<std::vector<std::vector<float>>> PredictWithCheckpoints(
    const std::vector<std::string>& checkpoints, const std::vector<float>& rows, int features) {
  int64_t n = features > 0 ? static_cast<int64_t>(rows.size()) / features : 0;
  torch::Tensor x = torch::from_blob(const_cast<float*>(rows.data()), {n, features});
  auto members = LoadMembers(checkpoints, features);
  if (!members.ok()) return members.status();
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < members->size(); ++i) {
    try {
      out.push_back((*members)[i].Predict(x));
    } catch (const c10::Error& e) {
      return Status::Internal(checkpoints[i] + ": " + e.what_without_backtrace());
    }
  }
  return out;
}

Status PredictStream(const std::vector<std::string>& checkpoints, int features, int in_fd, int out_fd) {
  auto loaded = LoadMembers(checkpoints, features);
  if (!loaded.ok()) return loaded.status();
  std::vector<PredictingMember>& members = *loaded;
  constexpr uint64_t kMaxBatchFloats = uint64_t{1} << 30;  // 4 GiB of input: a corrupt count, not a batch
  for (;;) {
    uint64_t n = 0;
    bool eof = false;
    Status s = ReadFull(in_fd, &n, sizeof n, "predict stream", &eof);
    if (!s.ok()) return s;
    if (eof || n == 0) return Status::Ok();
    if (features <= 0 || n > kMaxBatchFloats / static_cast<uint64_t>(features))
      return Status::InvalidArgument("predict stream: a batch of " + std::to_string(n) + " rows is too large");
    std::vector<float> rows(n * static_cast<uint64_t>(features));
    s = ReadFull(in_fd, rows.data(), rows.size() * sizeof(float), "predict stream");
    if (!s.ok()) return s;
    torch::Tensor x = torch::from_blob(rows.data(), {static_cast<int64_t>(n), features});
    std::vector<float> out;
    out.reserve(n * members.size());
    try {
      for (auto& m : members) {
        std::vector<float> p = m.Predict(x);
        out.insert(out.end(), p.begin(), p.end());
      }
    } catch (const c10::Error& e) {
      return Status::Internal(std::string("predict stream: ") + e.what_without_backtrace());
    }
    s = WriteFull(out_fd, out.data(), out.size() * sizeof(float), "predict stream");
    if (!s.ok()) return s;
  }
}

StatusOr<nlohmann::json> CompareCheckpoints(const std::string& a, const std::string& b) {
  auto ma = LoadMember(a);
  if (!ma.ok()) return ma.status();
  auto mb = LoadMember(b);
  if (!mb.ok()) return mb.status();
  // Whether each forward runs in fixed blocks (checkpoint.h): one written before that gave
  // predictions that depended on their batch.
  const nlohmann::json blocked = {ma->find_method("forward_block").has_value(), mb->find_method("forward_block").has_value()};
  auto result = [&](nlohmann::json r) {
    r["blocked"] = blocked;
    return r;
  };
  NamedTensors ta = MemberBuffers(*ma), tb = MemberBuffers(*mb);
  if (ta.size() != tb.size())
    return result({{"equal", false}, {"tensor", "(tensor count)"}, {"max_abs_diff", nullptr}});
  for (size_t i = 0; i < ta.size(); ++i) {
    const auto& [name, x] = ta[i];
    const torch::Tensor& y = tb[i].second;
    if (name != tb[i].first || x.sizes() != y.sizes() || x.dtype() != y.dtype())
      return result({{"equal", false}, {"tensor", name}, {"max_abs_diff", nullptr}});
    // Bitwise: compare the raw bytes, so -0.0 vs 0.0 and NaN payloads count as different.
    torch::Tensor xc = x.contiguous(), yc = y.contiguous();
    if (std::memcmp(xc.data_ptr(), yc.data_ptr(), xc.nbytes()) != 0) {
      double diff = (xc.to(torch::kDouble) - yc.to(torch::kDouble)).abs().max().item<double>();
      return result({{"equal", false}, {"tensor", name}, {"max_abs_diff", diff}});
    }
  }
  return result({{"equal", true}});
}

Status ExportEnsemble(const std::vector<std::string>& checkpoints, const std::string& output,
                      const std::vector<double>& scale, const std::vector<double>& noise) {
  auto module = BuildEnsembleModule(checkpoints, scale, noise);
  if (!module.ok()) return module.status();
  return SaveModule(*module, output);
}

Status WriteMemberModule(const std::string& checkpoint, const std::string& output) {
  auto module = LoadMember(checkpoint);
  if (!module.ok()) return module.status();
  return SaveModule(*module, output);
}

StatusOr<int> CheckUserModel(const std::string& path, int features, int outputs) {
  int width = 0;
  auto m = LoadUserModule(path, features, outputs, &width);
  if (!m.ok()) return m.status();
  return width;
}

}  // namespace ens
