#include "worker/predict/checkpoint.h"

#include <functional>
#include <memory>
#include <sstream>

#include <sys/stat.h>

#include "common/base/atomic_file.h"
#include "common/state/member_view.h"
#include "common/state/member_weights.h"
#include "common/state/run_layout.h"
#include "common/config/lane_fit.h"
#include "common/config/run_head.h"
#include "worker/kernels/predict_rows_kernel.h"
#include "worker/models/lane_forward_source.h"
#include "worker/models/script_model.h"

namespace ens {
namespace {

constexpr const char* kNormNames[] = {"x_mean", "x_std", "y_mean", "y_std"};

// Every prediction is computed in blocks of kPredictBlockRows rows (the last one padded with
// zero rows, their outputs dropped), and each block's rows are laid out with a row stride of a
// multiple of 16 floats (64 bytes) before every statement of the model: so every GEMM and
// every elementwise kernel sees one shape and one alignment per row, whatever the batch and
// wherever the row sits in it. MKL's small-output sgemm path takes another summation order for
// a row that is not 16-byte aligned (measured: features not a multiple of 4, outputs <= 9),
// and other shapes take other kernels; docs/internals.md "Batch-independent predictions".
std::string BlockLoopSource(const std::string& block_method, int arity) {
  const std::string b = std::to_string(kPredictBlockRows);
  std::string src =
      "    n = x.size(0)\n"
      "    outs: List[List[Tensor]] = []\n"
      "    for s in range(0, max(n, 1), " + b + "):\n"
      "        m = min(" + b + ", n - s)\n"
      "        blk = x.narrow(0, s, m)\n"
      "        if m < " + b + ":\n"
      "            blk = torch.cat([blk, torch.zeros([" + b + " - m, x.size(1)], dtype=x.dtype, device=x.device)])\n"
      "        r = self." + block_method + "(blk)\n"
      "        outs.append([t.narrow(0, 0, m) for t in r])\n";
  if (arity == 1) return src + "    return torch.cat([o[0] for o in outs])\n";
  src += "    return (";
  for (int i = 0; i < arity; ++i)
    src += (i ? ", " : "") + std::string("torch.cat([o[") + std::to_string(i) + "] for o in outs])";
  return src + ")\n";
}

constexpr const char* kAlignRowsSource =
    "def align_rows(self, h):\n"
    "    if h.dim() != 2:\n"
    "        return h\n"
    "    w = h.size(1)\n"
    "    buf = torch.zeros([h.size(0), (w + 15) // 16 * 16], dtype=h.dtype, device=h.device)\n"
    "    buf.narrow(1, 0, w).copy_(h)\n"
    "    return buf.narrow(1, 0, w)\n";

// The model's statements, each given its input with aligned rows.
std::string AlignedStatements(const std::string& statements) {
  std::string out;
  size_t at = 0;
  while (at < statements.size()) {
    size_t end = statements.find('\n', at);
    end = end == std::string::npos ? statements.size() : end + 1;
    const std::string line = statements.substr(at, end - at);
    if (line.size() > 4 && line.compare(0, 4, "    ") == 0 && line[4] != ' ')  // a top-level statement
      out += "    h = self.align_rows(h)\n";
    out += line;
    at = end;
  }
  return out;
}

// The head's output in target units: class probabilities, [mean, variance], [n, T] for
// several targets, [n] for one.
const char* HeadSource(const RunHead& head) {
  switch (head.kind()) {
    case RunHead::Kind::kClassification: return "    return [torch.softmax(h, 1)]\n";
    case RunHead::Kind::kGaussian:
      return "    r = h[:, 1]\n"
             "    v = torch.log1p(torch.exp(-torch.abs(r))) + torch.relu(r) + 1e-6\n"
             "    return [torch.stack([h[:, 0] * self.y_std + self.y_mean, v * self.y_std * self.y_std], 1)]\n";
    case RunHead::Kind::kRegression: break;
  }
  return head.targets() > 1 ? "    return [h * self.y_std + self.y_mean]\n"
                            : "    return [h.squeeze(1) * self.y_std + self.y_mean]\n";
}

// The whole forward: standardise, the model's statements, then the head, in blocks.
std::string ForwardSource(const MemberParts& parts) {
  const int targets = parts.y_mean.defined() ? static_cast<int>(parts.y_mean.numel()) : 1;
  const RunHead head = RunHead::For(parts.spec.loss, parts.classes, targets);
  return std::string(kAlignRowsSource) + (UsesLaneMethods(parts.forward_source) ? LaneMethodsSource() : "") +
         "def forward_block(self, x):\n"
         "    h = (x - self.x_mean) / self.x_std\n" +
         AlignedStatements(parts.forward_source) + HeadSource(head) +
         "def forward(self, x):\n" + BlockLoopSource("forward_block", 1);
}

// kAlignRowsSource, eagerly.
torch::Tensor AlignRows(const torch::Tensor& h) {
  if (h.dim() != 2) return h;
  const int64_t w = h.size(1);
  torch::Tensor buf = torch::zeros({h.size(0), (w + 15) / 16 * 16}, torch::TensorOptions().dtype(h.dtype()).device(h.device()));
  buf.narrow(1, 0, w).copy_(h);
  return buf.narrow(1, 0, w);
}

// HeadSource, eagerly: the same operations on the same operands.
torch::Tensor HeadEager(const RunHead& head, const torch::Tensor& h, const torch::Tensor& y_mean,
                        const torch::Tensor& y_std) {
  switch (head.kind()) {
    case RunHead::Kind::kClassification: return torch::softmax(h, 1);
    case RunHead::Kind::kGaussian: {
      const torch::Tensor r = h.select(1, 1);
      const torch::Tensor v = torch::log1p(torch::exp(-torch::abs(r))) + torch::relu(r) + 1e-6;
      return torch::stack({h.select(1, 0) * y_std + y_mean, v * y_std * y_std}, 1);
    }
    case RunHead::Kind::kRegression: break;
  }
  return head.targets() > 1 ? h * y_std + y_mean : h.squeeze(1) * y_std + y_mean;
}

// A tensor as BuildMemberModule registers it as a buffer.
torch::Tensor AsBuffer(const torch::Tensor& t) {
  // The common case (a CPU tensor, contiguous, outside autograd) as it is: no operator at all.
  if (t.device().is_cpu() && t.is_contiguous()) return t.requires_grad() ? t.detach() : t;
  return t.detach().to(torch::kCPU).contiguous();
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Runs `forward_block` on x [n, features] in blocks of exactly kPredictBlockRows rows (the last
// padded with zero rows) and gathers the rows' outputs.
std::vector<float> PredictInBlocks(const torch::Tensor& x, const std::function<torch::Tensor(const torch::Tensor&)>& forward_block) {
  // Inference mode: the same kernels as under no_grad, with fewer dispatch layers per operator
  // (by operators a two-layer member's block is ~20 that compute, besides views; by loops, its 5).
  c10::InferenceMode inference;
  const int64_t n = x.size(0);
  std::vector<float> out;
  if (n == 0) return out;
  torch::Tensor block = torch::zeros({kPredictBlockRows, x.size(1)}, x.options());
  for (int64_t b = 0; b < n; b += kPredictBlockRows) {
    const int64_t len = std::min(kPredictBlockRows, n - b);
    block.narrow(0, 0, len).copy_(x.narrow(0, b, len));
    if (len < kPredictBlockRows) block.narrow(0, len, kPredictBlockRows - len).zero_();
    torch::Tensor p = forward_block(block).narrow(0, 0, len).to(torch::kCPU).contiguous();
    if (out.empty()) out.reserve(static_cast<size_t>(n * (p.numel() / std::max<int64_t>(len, 1))));
    out.insert(out.end(), p.data_ptr<float>(), p.data_ptr<float>() + p.numel());
  }
  return out;
}

// The module's buffers in checkpoint order: the model's tensors, then the standardisation.
NamedTensors BufferList(const MemberParts& parts) {
  NamedTensors out;
  for (const auto& [name, t] : parts.tensors) out.emplace_back(name, AsBuffer(t));
  const torch::Tensor norm[] = {parts.x_mean, parts.x_std, parts.y_mean, parts.y_std};
  for (int i = 0; i < 4; ++i) out.emplace_back(kNormNames[i], AsBuffer(norm[i]));
  return out;
}

// A member module from its parts: the "spec" attribute, the buffers in order, the submodule
// "net" (a TorchScript member), and the methods of `source`. The class is named after the
// architecture (its source): members of one pack share it, and an export's serializer tells
// different architectures apart. `who` names the member in errors.
StatusOr<torch::jit::Module> BuildModule(const std::string& who, const std::string& spec_json, const std::string& source,
                                         const NamedTensors& buffers, const std::optional<torch::jit::Module>& net) {
  try {
    UsePlainTorchScriptExecutor();
    const auto arch = std::hash<std::string>{}(source + (net ? net->type()->repr_str() : ""));
    torch::jit::Module m(c10::QualifiedName("ensembled.Member_" + std::to_string(arch)),
                         std::make_shared<torch::jit::CompilationUnit>());
    m.register_attribute("spec", c10::StringType::get(), spec_json);
    for (const auto& [name, t] : buffers) m.register_buffer(name, t);
    if (net) m.register_module("net", *net);
    m.define(source);
    m.eval();
    return m;
  } catch (const std::exception& e) {  // c10::Error, or a TorchScript compile error
    return Status::Internal(who + ": cannot build its module: " + e.what());
  }
}

}  // namespace

StatusOr<torch::jit::Module> BuildMemberModule(const MemberParts& parts) {
  return BuildModule("member " + parts.spec.name, MemberToJson(parts.spec).dump(), ForwardSource(parts),
                     BufferList(parts), parts.net);
}

StatusOr<torch::jit::Module> BuildMemberModule(const MemberWeights& weights, const std::string& origin) {
  NamedTensors buffers;
  for (const StoredTensor& t : weights.tensors)  // copied: the module owns its buffers
    buffers.emplace_back(t.name, torch::from_blob(const_cast<float*>(t.values.data()), t.shape, torch::kFloat).clone());
  return BuildModule(origin, weights.spec_json, weights.source, buffers, std::nullopt);
}

StatusOr<std::string> MemberWeightsFileBytes(const MemberParts& parts) {
  if (parts.net) return Status::InvalidArgument("member " + parts.spec.name + ": a TorchScript member is saved as its module");
  MemberWeights w{MemberToJson(parts.spec).dump(), ForwardSource(parts), {}};
  for (auto& [name, t] : BufferList(parts)) {
    if (t.scalar_type() != torch::kFloat)
      return Status::InvalidArgument("member " + parts.spec.name + ": tensor " + name + " is not float32");
    const float* p = t.data_ptr<float>();
    w.tensors.push_back({name, t.sizes().vec(), std::vector<float>(p, p + t.numel())});
  }
  return MemberWeightsBytes(w);
}

StatusOr<torch::jit::Module> MemberModuleBuilder::Build(const MemberParts& parts) {
  if (parts.net) return BuildMemberModule(parts);  // a module of its own: nothing to share
  if (!prototype_ || prototype_source_ != ForwardSource(parts)) {
    auto built = BuildMemberModule(parts);
    if (built.ok()) {
      prototype_ = *built;
      prototype_source_ = ForwardSource(parts);
    }
    return built;
  }
  try {
    torch::jit::Module m = prototype_->deepcopy();
    m.setattr("spec", MemberToJson(parts.spec).dump());
    for (const auto& [name, t] : parts.tensors) m.setattr(name, t.detach().to(torch::kCPU).contiguous());
    const torch::Tensor norm[] = {parts.x_mean, parts.x_std, parts.y_mean, parts.y_std};
    for (int i = 0; i < 4; ++i) m.setattr(kNormNames[i], norm[i].detach().to(torch::kCPU).contiguous());
    return m;
  } catch (const std::exception& e) {
    return Status::Internal("member " + parts.spec.name + ": cannot build its module: " + e.what());
  }
}

StatusOr<std::string> ModuleBytes(const torch::jit::Module& module) {
  try {
    std::ostringstream bytes;
    module.save(bytes);
    return bytes.str();
  } catch (const c10::Error& e) {
    return Status::Internal(e.what_without_backtrace());
  }
}

Status SaveModule(const torch::jit::Module& module, const std::string& path, bool durable) {
  // Serialised in memory, then written with the project's checked write: torch's file writer
  // aborts the process on ENOSPC, and it would create the file under the umask.
  auto bytes = ModuleBytes(module);
  if (!bytes.ok()) return Status::IOError("save checkpoint " + path + ": " + bytes.status().message());
  return durable ? WriteFileDurable(path, *bytes) : WriteFileUnsynced(path, *bytes);
}

StatusOr<torch::jit::Module> LoadMember(const std::string& path) {
  UsePlainTorchScriptExecutor();
  // A member directory, or the directory path of a packed member (member_view.h).
  const std::string file = IsDirectory(path) || MemberExists(path) ? MemberFiles(path).StoredCheckpoint() : path;
  auto bytes = ReadMemberFile(file);
  if (!bytes.ok()) return Status::Corruption("load checkpoint " + file + ": " + bytes.status().message());
  if (LooksLikeMemberWeights(*bytes)) {  // weights.bin: its module is built now
    auto weights = ParseMemberWeights(*bytes, file);
    if (!weights.ok()) return weights.status();
    return BuildMemberModule(*weights, file);
  }
  try {
    std::istringstream in(*bytes);
    torch::jit::Module m = torch::jit::load(in, torch::kCPU);
    if (!m.hasattr("spec") || !m.attr("spec").isString() || !m.hasattr("x_mean"))
      return Status::Corruption(file + ": not an ensembled member checkpoint (no spec or norm)");
    m.eval();
    return m;
  } catch (const c10::Error& e) {
    return Status::Corruption("load checkpoint " + file + ": " + e.what_without_backtrace());
  }
}

namespace {

// A lane member's parts from its weights file, or none when the file is not exactly one.
std::optional<MemberParts> LaneParts(const MemberWeights& w) {
  if (!UsesLaneMethods(w.source) || w.tensors.size() < 6 || w.tensors.size() % 2 != 0) return std::nullopt;
  MemberParts parts;
  if (!MemberFromJson(nlohmann::json::parse(w.spec_json, nullptr, false), &parts.spec).ok()) return std::nullopt;
  const size_t layers = (w.tensors.size() - 4) / 2;
  if (layers > static_cast<size_t>(kLaneMaxLayers) || parts.spec.layers.size() + 1 != layers) return std::nullopt;
  auto tensor = [](const StoredTensor& t) {  // copied: the parts own their tensors
    return torch::from_blob(const_cast<float*>(t.values.data()), t.shape, torch::kFloat).clone();
  };
  const std::vector<StoredTensor>& ts = w.tensors;
  const std::vector<int64_t>& features = ts[2 * layers].shape;
  if (ts[2 * layers].name != kNormNames[0] || features.size() != 1) return std::nullopt;
  std::vector<int64_t> units;
  std::vector<Activation> activations;
  int64_t in = features[0];
  for (size_t l = 0; l < layers; ++l) {
    const StoredTensor &wt = ts[2 * l], &bt = ts[2 * l + 1];
    const std::string name = "layer" + std::to_string(l);
    if (wt.name != name + "_weight" || bt.name != name + "_bias" || wt.shape.size() != 2 || wt.shape[1] != in ||
        bt.shape != std::vector<int64_t>{wt.shape[0]})
      return std::nullopt;
    in = wt.shape[0];
    units.push_back(in);
    if (l + 1 < layers) {
      if (parts.spec.layers[l].units != in) return std::nullopt;
      activations.push_back(parts.spec.layers[l].activation);
    }
    parts.tensors.emplace_back(wt.name, tensor(wt));
    parts.tensors.emplace_back(bt.name, tensor(bt));
  }
  torch::Tensor* norm[] = {&parts.x_mean, &parts.x_std, &parts.y_mean, &parts.y_std};
  for (size_t i = 0; i < 4; ++i) {  // x's [features], y's [1]: one target
    const StoredTensor& t = ts[2 * layers + i];
    if (t.name != kNormNames[i] || t.shape != (i < 2 ? features : std::vector<int64_t>{1})) return std::nullopt;
    *norm[i] = tensor(t);
  }
  parts.forward_source = LaneForwardSource(layers, activations);
  // Exactly the module the worker saved for such a member: else its module is the truth.
  if (ForwardSource(parts) != w.source) return std::nullopt;
  parts.statements = {LaneForwardStatement(features[0], units, activations)};
  return parts;
}

}  // namespace

StatusOr<std::optional<MemberParts>> LoadLaneMemberParts(const std::string& path) {
  const std::string file = IsDirectory(path) || MemberExists(path) ? MemberFiles(path).StoredCheckpoint() : path;
  auto bytes = ReadMemberFile(file);
  if (!bytes.ok()) return Status::Corruption("load checkpoint " + file + ": " + bytes.status().message());
  if (!LooksLikeMemberWeights(*bytes)) return std::optional<MemberParts>();
  auto weights = ParseMemberWeights(*bytes, file);
  if (!weights.ok()) return weights.status();
  return LaneParts(*weights);
}

NamedTensors MemberBuffers(const torch::jit::Module& member) {
  NamedTensors out;
  for (const auto& b : member.named_buffers(/*recurse=*/false)) out.emplace_back(b.name, b.value);
  for (const auto& c : member.named_children()) {
    for (const auto& p : c.value.named_parameters(/*recurse=*/true)) out.emplace_back(c.name + "." + p.name, p.value);
    for (const auto& b : c.value.named_buffers(/*recurse=*/true)) out.emplace_back(c.name + "." + b.name, b.value);
  }
  return out;
}

int64_t MemberFeatures(const torch::jit::Module& member) { return member.attr("x_mean").toTensor().numel(); }

std::vector<float> PredictRows(torch::jit::Module& member, const torch::Tensor& x) {
  // Blocks of kPredictBlockRows, the last padded: a member module written before its forward
  // blocked on its own (or any module) still sees one shape whatever the batch.
  return PredictInBlocks(x, [&](const torch::Tensor& block) { return member.forward({block}).toTensor(); });
}

namespace {

bool PlainCpuFloats(const torch::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.is_contiguous();
}

// A 2-d float tensor on the CPU whose rows are contiguous (any row stride).
bool CpuRows(const torch::Tensor& t) {
  return t.defined() && t.dim() == 2 && t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.stride(1) == 1;
}

// PredictRowsByOps's blocks with its standardisation, row copies and regression head as plain
// loops (worker/kernels/predict_rows_kernel.h: the same exactly rounded operations) around the same
// statements on the same aligned rows. Empty when a statement's output is not plain rows (a
// model this does not know): the caller runs PredictRowsByOps.
std::optional<std::vector<float>> PredictRowsByLoops(const MemberParts& parts, const NamedTensors& tensors,
                                                     const torch::Tensor& x, const torch::Tensor& x_mean,
                                                     const torch::Tensor& x_std, const torch::Tensor& y_mean,
                                                     const torch::Tensor& y_std, int targets) {
  c10::InferenceMode inference;
  const int64_t n = x.size(0), f = x.size(1), rows = kPredictBlockRows;
  auto aligned = [](int64_t w) { return (w + 15) / 16 * 16; };
  // Each statement's input rows: 64-byte aligned, a stride of a multiple of 16 floats (what
  // align_rows gives the module's statements). Made once a call, refilled every block.
  std::vector<torch::Tensor> buffers(parts.statements.size()), inputs(parts.statements.size());
  buffers[0] = torch::empty({rows, aligned(f)}, torch::kFloat);
  inputs[0] = buffers[0].narrow(1, 0, f);
  std::vector<float> out(static_cast<size_t>(n * targets));
  for (int64_t b = 0; b < n; b += rows) {
    const int64_t len = std::min(rows, n - b);
    StandardiseRows(x.data_ptr<float>() + b * x.stride(0), x.stride(0), len, f, x_mean.data_ptr<float>(),
                    x_std.data_ptr<float>(), buffers[0].data_ptr<float>(), buffers[0].stride(0), rows);
    torch::Tensor h = inputs[0];
    for (size_t i = 0; i < parts.statements.size(); ++i) {
      if (i > 0) {
        if (!CpuRows(h) || h.size(0) != rows) return std::nullopt;
        if (!buffers[i].defined()) {
          buffers[i] = torch::empty({rows, aligned(h.size(1))}, torch::kFloat);
          inputs[i] = buffers[i].narrow(1, 0, h.size(1));
        }
        if (inputs[i].size(1) != h.size(1)) return std::nullopt;
        CopyRows(h.data_ptr<float>(), h.stride(0), rows, h.size(1), buffers[i].data_ptr<float>(), buffers[i].stride(0));
        h = inputs[i];
      }
      h = parts.statements[i](tensors, h);
    }
    if (!CpuRows(h) || h.size(0) != rows || h.size(1) != targets) return std::nullopt;
    AffineRows(h.data_ptr<float>(), h.stride(0), len, targets, y_std.data_ptr<float>(), y_mean.data_ptr<float>(),
               out.data() + b * targets);
  }
  return out;
}

// A member's buffers as its module holds them, and its head.
struct PreparedMember {
  NamedTensors tensors;
  torch::Tensor x_mean, x_std, y_mean, y_std;
  int targets = 1;
  RunHead head = RunHead::Regression();
};

PreparedMember Prepare(const MemberParts& parts) {
  PreparedMember m;
  for (const auto& [name, t] : parts.tensors) m.tensors.emplace_back(name, AsBuffer(t));
  m.x_mean = AsBuffer(parts.x_mean);
  m.x_std = AsBuffer(parts.x_std);
  m.y_mean = AsBuffer(parts.y_mean);
  m.y_std = AsBuffer(parts.y_std);
  m.targets = parts.y_mean.defined() ? static_cast<int>(parts.y_mean.numel()) : 1;
  m.head = RunHead::For(parts.spec.loss, parts.classes, m.targets);
  return m;
}

std::vector<float> ByOps(const MemberParts& parts, const PreparedMember& m, const torch::Tensor& x) {
  // forward(x) on one full block is forward_block(x) (BlockLoopSource); ForwardSource's order.
  return PredictInBlocks(x, [&](const torch::Tensor& block) {
    torch::Tensor h = (block - m.x_mean) / m.x_std;
    for (const MemberStatement& statement : parts.statements) h = statement(m.tensors, AlignRows(h));
    return HeadEager(m.head, h, m.y_mean, m.y_std);
  });
}

}  // namespace

std::vector<float> PredictRows(const MemberParts& parts, const torch::Tensor& x) {
  if (x.size(0) == 0) return {};  // an empty pool: no buffers to prepare
  const PreparedMember m = Prepare(parts);
  // A regression head on plain float rows: the loops (most members); anything else, the ops.
  const int64_t f = x.size(1);
  if (m.head.kind() == RunHead::Kind::kRegression && CpuRows(x) && PlainCpuFloats(m.x_mean) &&
      PlainCpuFloats(m.x_std) && PlainCpuFloats(m.y_mean) && PlainCpuFloats(m.y_std) && m.x_mean.numel() == f &&
      m.x_std.numel() == f && m.y_mean.numel() == m.targets && m.y_std.numel() == m.targets) {
    auto by_loops = PredictRowsByLoops(parts, m.tensors, x, m.x_mean, m.x_std, m.y_mean, m.y_std, m.targets);
    if (by_loops) return std::move(*by_loops);
  }
  return ByOps(parts, m, x);
}

std::vector<float> PredictRowsByOps(const MemberParts& parts, const torch::Tensor& x) {
  return ByOps(parts, Prepare(parts), x);
}

std::string TrainStateBytes(const TrainState& state) {
  c10::Dict<std::string, at::Tensor> d;
  d.insert("step", torch::tensor(state.step, torch::kLong));
  auto put = [&](const char* prefix, const std::vector<torch::Tensor>& ts) {
    for (size_t i = 0; i < ts.size(); ++i)
      d.insert(prefix + std::to_string(i), ts[i].detach().to(torch::kCPU).contiguous());
  };
  put("param.", state.params);
  put("m.", state.m);
  put("v.", state.v);
  std::vector<char> bytes = torch::pickle_save(c10::IValue(d));
  return std::string(bytes.begin(), bytes.end());
}

StatusOr<TrainState> LoadTrainState(const std::string& path) {
  auto bytes = ReadMemberFile(path);  // its own file, or its span of its pack's
  if (!bytes.ok()) return bytes.status().code() == Status::Code::kNotFound ? bytes.status()
                                                                           : Status::Corruption(bytes.status().message());
  try {
    c10::IValue v = torch::pickle_load(std::vector<char>(bytes->begin(), bytes->end()));
    if (!v.isGenericDict()) return Status::Corruption(path + ": not a train state (no dict)");
    auto d = c10::impl::toTypedDict<std::string, at::Tensor>(v.toGenericDict());
    if (!d.contains("step")) return Status::Corruption(path + ": not a train state (no step)");
    TrainState s;
    s.step = d.at("step").item<int64_t>();
    auto take = [&](const std::string& prefix, std::vector<torch::Tensor>* out) {
      for (size_t i = 0; d.contains(prefix + std::to_string(i)); ++i) out->push_back(d.at(prefix + std::to_string(i)));
    };
    take("param.", &s.params);
    take("m.", &s.m);
    take("v.", &s.v);
    if (s.step < 0 || s.params.empty()) return Status::Corruption(path + ": not a train state (no parameters)");
    return s;
  } catch (const std::exception& e) {
    std::string what = e.what();
    return Status::Corruption(path + ": not a train state: " + what.substr(0, what.find('\n')));
  }
}

StatusOr<torch::jit::Module> BuildEnsembleModule(const std::vector<std::string>& checkpoints,
                                                 const std::vector<double>& scale, const std::vector<double>& noise) {
  if (checkpoints.empty()) return Status::InvalidArgument("export: no member checkpoints");
  try {
    torch::jit::Module ens(c10::QualifiedName("ensembled.Ensemble"), std::make_shared<torch::jit::CompilationUnit>());
    // The calibration (identity when none): [targets] float tensors that broadcast over [rows, targets].
    auto values = [](const std::vector<double>& v, double none) {
      std::vector<float> f(v.begin(), v.end());
      if (f.empty()) f.push_back(static_cast<float>(none));
      return torch::tensor(f);
    };
    ens.register_attribute("sigma_scale", c10::TensorType::get(), values(scale, 1.0));
    ens.register_attribute("sigma_noise", c10::TensorType::get(), values(noise, 0.0));
    std::string calls;
    int64_t features = -1;
    bool gaussian = false;
    for (size_t i = 0; i < checkpoints.size(); ++i) {
      auto m = LoadMember(checkpoints[i]);
      if (!m.ok()) return m.status();
      if (features >= 0 && MemberFeatures(*m) != features)
        return Status::InvalidArgument(checkpoints[i] + ": expects " + std::to_string(MemberFeatures(*m)) +
                                       " features, the first member " + std::to_string(features));
      features = MemberFeatures(*m);
      MemberSpec spec;
      if (i == 0 && MemberFromJson(nlohmann::json::parse(m->attr("spec").toStringRef(), nullptr, false), &spec).ok())
        gaussian = RunHead::For(spec.loss, 0, 1).gaussian();
      std::string name = "m" + std::to_string(i);
      ens.register_module(name, *m);
      calls += (i ? ", self." : "self.") + name + ".forward(x)";
    }
    // Blocked like the members' own forward (same block size: each member sees one block),
    // so the mean and std of a row are the same bits on any batch.
    if (gaussian)  // the mixture: aleatoric = mean variance, epistemic = variance of the means
      ens.define("def forward_block(self, x):\n"
                 "    p = torch.stack([" + calls + "])\n"
                 "    mean = torch.mean(p[:, :, 0], 0)\n"
                 "    aleatoric = torch.mean(p[:, :, 1], 0)\n"
                 "    epistemic = torch.var(p[:, :, 0], 0, False)\n"
                 "    total = self.sigma_scale * self.sigma_scale * (aleatoric + epistemic) + self.sigma_noise * self.sigma_noise\n"
                 "    return [mean, torch.sqrt(aleatoric), torch.sqrt(epistemic), torch.sqrt(total)]\n"
                 "def forward(self, x):\n" + BlockLoopSource("forward_block", 4));
    else
      ens.define("def forward_block(self, x):\n"
                 "    p = torch.stack([" + calls + "])\n"
                 "    s = torch.std(p, 0, False)\n"
                 "    return [torch.mean(p, 0), torch.sqrt(self.sigma_scale * self.sigma_scale * s * s + self.sigma_noise * self.sigma_noise)]\n"
                 "def forward(self, x):\n" + BlockLoopSource("forward_block", 2));
    ens.eval();
    return ens;
  } catch (const std::exception& e) {  // c10::Error, or a TorchScript compile error
    return Status::Internal(std::string("export: ") + e.what());
  }
}

}  // namespace ens
