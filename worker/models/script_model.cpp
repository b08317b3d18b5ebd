#include "worker/models/script_model.h"

#include <ATen/CPUGeneratorImpl.h>

#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

namespace ens {
namespace {

// The line of a TorchScript error that says what went wrong: its last "Error: ..." line (the
// interpreter's traceback comes first), else its first line.
std::string Cause(const std::string& what) {
  size_t at = what.rfind("Error: ");
  if (at != std::string::npos) {
    size_t start = what.rfind('\n', at);
    std::string line = what.substr(start == std::string::npos ? 0 : start + 1);
    return line.substr(0, line.find('\n'));
  }
  return what.substr(0, what.find('\n'));
}

std::string Shape(const torch::Tensor& t) {
  std::ostringstream s;
  s << t.sizes();
  return s.str();
}

// The module that holds attribute `dotted` ("block.0.weight") and the attribute's last name.
std::pair<torch::jit::Module, std::string> Owner(const torch::jit::Module& root, const std::string& dotted) {
  torch::jit::Module m = root;
  size_t start = 0;
  for (size_t dot = dotted.find('.'); dot != std::string::npos; dot = dotted.find('.', start)) {
    m = m.attr(dotted.substr(start, dot - start)).toModule();
    start = dot + 1;
  }
  return {m, dotted.substr(start)};
}

class ScriptModel : public Model {
 public:
  ScriptModel(const ModelMember& member, torch::jit::Module module, int outputs, torch::Device device)
      : module_(std::move(module)), outputs_(outputs), path_(member.spec->model.path) {
    module_.to(device);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(member.init_seed);
    for (const auto& p : module_.named_parameters(/*recurse=*/true)) {
      torch::Tensor v = p.value.detach().to(torch::kCPU);
      if (member.spec->model.init == ScriptInit::kMember)
        v = v.dim() >= 2 ? InitWeight(member.spec->initializer, v.sizes(), gen) : torch::zeros_like(v);
      std::vector<int64_t> stacked{1};
      for (int64_t d = v.dim(); d < 2; ++d) stacked.push_back(1);
      for (int64_t s : v.sizes()) stacked.push_back(s);
      names_.push_back(p.name);
      shapes_.push_back(v.sizes().vec());
      slots_.push_back(Owner(module_, p.name));
      params_.push_back(v.reshape(stacked).clone().to(device).requires_grad_(true));
      if (v.dim() >= 2) kernels_.push_back(params_.back());
    }
    torch::manual_seed(member.dropout_seed);  // the module's own dropout (a pack of one)
  }

  int64_t Members() const override { return 1; }
  std::vector<torch::Tensor> Parameters() const override { return params_; }
  std::vector<torch::Tensor> Kernels() const override { return kernels_; }

  torch::Tensor Forward(const torch::Tensor& x, bool training) override {
    if (!mode_ || *mode_ != training) {
      module_.train(training);
      mode_ = training;
    }
    for (size_t i = 0; i < params_.size(); ++i) slots_[i].first.setattr(slots_[i].second, params_[i].view(shapes_[i]));
    torch::Tensor out = module_.forward({x.select(0, 0)}).toTensor();
    TORCH_CHECK(out.dim() == 2 && out.size(0) == x.size(1) && out.size(1) == outputs_, "model ", path_,
                ": forward(x) of x ", Shape(x.select(0, 0)), " returned ", Shape(out), "; this member needs [",
                x.size(1), ", ", outputs_, "]");
    return out.unsqueeze(0);
  }

  NamedTensors MemberTensors(const std::vector<torch::Tensor>&) const override { return {}; }
  std::string MemberForwardSource() const override { return "    h = self.net.forward(h)\n"; }

  std::optional<torch::jit::Module> MemberNet(const std::vector<torch::Tensor>& slices) const override {
    torch::jit::Module net = module_.deepcopy();
    net.to(torch::kCPU);
    net.eval();
    for (size_t i = 0; i < names_.size(); ++i) {
      auto [owner, name] = Owner(net, names_[i]);
      owner.setattr(name, slices[i].detach().reshape(shapes_[i]).to(torch::kCPU).contiguous());
    }
    return net;
  }

 private:
  torch::jit::Module module_;
  int outputs_;
  std::string path_;
  std::optional<bool> mode_;
  std::vector<std::string> names_;
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<std::pair<torch::jit::Module, std::string>> slots_;
  std::vector<torch::Tensor> params_, kernels_;
};

}  // namespace

void UsePlainTorchScriptExecutor() { torch::jit::setGraphExecutorOptimize(false); }

StatusOr<torch::jit::Module> LoadUserModule(const std::string& path, int features, int outputs, int* width) {
  UsePlainTorchScriptExecutor();
  if (!std::ifstream(path).good()) return Status::NotFound(path + ": no such file (model.path)");
  torch::jit::Module m;
  try {
    m = torch::jit::load(path, torch::kCPU);
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    return Status::InvalidArgument(path + ": not a TorchScript module (save one with torch.jit.save(torch.jit.script(model), path)): " +
                                   what.substr(0, what.find(". ")));
  }
  if (!m.find_method("forward"))
    return Status::InvalidArgument(path + ": the module has no forward(x) method");
  try {
    m.to(torch::kFloat);
    m.eval();
    torch::NoGradGuard no_grad;
    torch::Tensor x = torch::zeros({2, features});
    c10::IValue y = m.forward({x});
    if (!y.isTensor())
      return Status::InvalidArgument(path + ": forward(x) returned a " + y.tagKind() + ", not one tensor");
    torch::Tensor t = y.toTensor();
    const bool width_ok = outputs > 0 ? t.dim() == 2 && t.size(1) == outputs : t.dim() == 2 && t.size(1) >= 1;
    if (t.dim() != 2 || t.size(0) != 2 || !width_ok)
      return Status::InvalidArgument(path + ": forward(x) of x [2, " + std::to_string(features) + "] returned " +
                                     Shape(t) + "; this run needs [2, " +
                                     (outputs > 0 ? std::to_string(outputs) : std::string("n")) + "]" +
                                     (outputs == 1 ? " (one prediction per row)" : ""));
    if (width) *width = static_cast<int>(t.size(1));
  } catch (const std::exception& e) {
    return Status::InvalidArgument(path + ": forward(x) of x [2, " + std::to_string(features) + "] failed (does it take " +
                                   std::to_string(features) + " features?): " + Cause(e.what()));
  }
  m.train();
  return m;
}

std::unique_ptr<Model> BuildScriptModel(const ModelMember& member, torch::jit::Module module, int outputs,
                                        torch::Device device) {
  return std::make_unique<ScriptModel>(member, std::move(module), outputs, device);
}

}  // namespace ens
