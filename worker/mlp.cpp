#include "worker/mlp.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <sstream>

#include "common/atomic_file.h"

namespace ens {
namespace {

torch::Tensor Activate(const torch::Tensor& h, const std::string& act) {
  if (act == "relu") return torch::relu(h);
  if (act == "tanh") return torch::tanh(h);
  if (act == "sigmoid") return torch::sigmoid(h);
  if (act == "swish") return h * torch::sigmoid(h);
  if (act == "gelu") return torch::gelu(h);
  return h;  // linear
}

torch::Tensor InitKernel(const std::string& init, int64_t in, int64_t out, at::Generator& gen) {
  auto opts = torch::TensorOptions().dtype(torch::kFloat32);
  if (init == "lecun_normal")
    return at::randn({out, in}, gen, opts) * static_cast<float>(std::sqrt(1.0 / in));
  double limit = init == "he_uniform" ? std::sqrt(6.0 / in) : std::sqrt(6.0 / (in + out));
  return at::rand({out, in}, gen, opts) * static_cast<float>(2 * limit) - static_cast<float>(limit);
}

}  // namespace

torch::Tensor Mlp::Forward(const torch::Tensor& x, bool training) const {
  torch::Tensor h = x;
  for (size_t i = 0; i < weights.size(); ++i) {
    h = torch::addmm(biases[i], h, weights[i].t());
    if (i + 1 < weights.size()) {
      const LayerSpec& layer = spec.layers[i];
      h = Activate(h, layer.activation);
      if (training && layer.dropout > 0) h = torch::dropout(h, layer.dropout, /*train=*/true);
    }
  }
  return h.squeeze(1);
}

std::vector<torch::Tensor> Mlp::Parameters() const {
  std::vector<torch::Tensor> p;
  for (size_t i = 0; i < weights.size(); ++i) {
    p.push_back(weights[i]);
    p.push_back(biases[i]);
  }
  return p;
}

torch::Tensor Mlp::PredictRaw(const torch::Tensor& raw_x) const {
  torch::NoGradGuard no_grad;
  torch::Tensor xn = (raw_x.to(x_mean.device()) - x_mean) / x_std;
  return Forward(xn, false) * y_std + y_mean;
}

Mlp BuildMlp(const MemberSpec& spec, int features, uint64_t init_seed, torch::Device device) {
  Mlp m;
  m.spec = spec;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(init_seed);
  int64_t in = features;
  std::vector<int64_t> widths;
  for (const auto& l : spec.layers) widths.push_back(l.units);
  widths.push_back(1);
  for (int64_t out : widths) {
    m.weights.push_back(InitKernel(spec.initializer, in, out, gen).to(device).requires_grad_(true));
    m.biases.push_back(torch::zeros({out}).to(device).requires_grad_(true));
    in = out;
  }
  return m;
}

Status SaveCheckpoint(const Mlp& m, const std::string& path) {
  try {
    torch::serialize::OutputArchive ar;
    ar.write("spec", c10::IValue(MemberToJson(m.spec).dump()));
    for (size_t i = 0; i < m.weights.size(); ++i) {
      ar.write("layer" + std::to_string(i) + ".weight", m.weights[i].detach().cpu());
      ar.write("layer" + std::to_string(i) + ".bias", m.biases[i].detach().cpu());
    }
    ar.write("norm.x_mean", m.x_mean.cpu());
    ar.write("norm.x_std", m.x_std.cpu());
    ar.write("norm.y_mean", m.y_mean.cpu());
    ar.write("norm.y_std", m.y_std.cpu());
    // Serialised in memory, then written with the project's checked write: torch's file
    // writer aborts the process on ENOSPC (it throws from a destructor), and it would create
    // the file under the umask instead of 0600.
    std::ostringstream bytes;
    ar.save_to(bytes);
    return WriteFileDurable(path, bytes.str());
  } catch (const std::exception& e) {
    return Status::IOError("save checkpoint " + path + ": " + e.what());
  }
}

StatusOr<std::vector<std::pair<std::string, torch::Tensor>>> CheckpointTensors(const std::string& path) {
  auto m = LoadCheckpoint(path);
  if (!m.ok()) return m.status();
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (size_t i = 0; i < m->weights.size(); ++i) {
    out.emplace_back("layer" + std::to_string(i) + ".weight", m->weights[i]);
    out.emplace_back("layer" + std::to_string(i) + ".bias", m->biases[i]);
  }
  out.emplace_back("norm.x_mean", m->x_mean);
  out.emplace_back("norm.x_std", m->x_std);
  out.emplace_back("norm.y_mean", m->y_mean);
  out.emplace_back("norm.y_std", m->y_std);
  return out;
}

StatusOr<Mlp> LoadCheckpoint(const std::string& path) {
  Mlp m;
  try {
    torch::serialize::InputArchive ar;
    ar.load_from(path);
    c10::IValue spec;
    if (!ar.try_read("spec", spec) || !spec.isString())
      return Status::Corruption(path + ": checkpoint has no member spec");
    auto j = nlohmann::json::parse(spec.toStringRef(), nullptr, false);
    Status s = MemberFromJson(j, &m.spec);
    if (!s.ok()) return Status::Corruption(path + ": " + s.message());
    for (size_t i = 0; i <= m.spec.layers.size(); ++i) {
      torch::Tensor w, b;
      ar.read("layer" + std::to_string(i) + ".weight", w);
      ar.read("layer" + std::to_string(i) + ".bias", b);
      m.weights.push_back(w);
      m.biases.push_back(b);
    }
    ar.read("norm.x_mean", m.x_mean);
    ar.read("norm.x_std", m.x_std);
    ar.read("norm.y_mean", m.y_mean);
    ar.read("norm.y_std", m.y_std);
  } catch (const std::exception& e) {
    return Status::Corruption("load checkpoint " + path + ": " + e.what());
  }
  return m;
}

}  // namespace ens
