#include "worker/models/lane_forward_source.h"

#include <cstdio>

namespace ens {
namespace {

// A float constant as TorchScript text that reads back to that float exactly: the float's
// value as a double with 17 digits (the double is the float; converting it back is exact).
std::string Exact(float f) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", static_cast<double>(f));
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";  // a float literal, not an int
  return s;
}

std::string MakeMethods() {
  // The kernel's constants (lane_kernel_body.inc Exp, Erf, Phi), each rounded to float as the
  // kernel's float literals and float divisions are.
  const std::string log2e = Exact(1.44269504088896341f), shift = Exact(12582912.0f);
  const std::string ln2_hi = Exact(0.693359375f), ln2_lo = Exact(-2.12194440e-4f);
  const std::string erf_p = Exact(0.3275911f), sqrt_half = Exact(0.707106781f);
  std::string s;
  s += "def lane_linear(self, h: Tensor, w: Tensor, b: Tensor) -> Tensor:\n"
       "    z = b + h[:, 0:1] * w[:, 0]\n"
       "    for i in range(1, w.size(1)):\n"
       "        z = z + h[:, i:i + 1] * w[:, i]\n"
       "    return z\n";
  s += "def lane_exp(self, x: Tensor) -> Tensor:\n"
       "    x = torch.where(x < -87.0, torch.full_like(x, -87.0), x)\n"
       "    x = torch.where(x > 88.0, torch.full_like(x, 88.0), x)\n"
       "    n = (x * " + log2e + " + " + shift + ") - " + shift + "\n"
       "    r = (x - n * " + ln2_hi + ") - n * " + ln2_lo + "\n"
       "    p = torch.full_like(x, " + Exact(1.0f / 720.0f) + ")\n"
       "    p = p * r + " + Exact(1.0f / 120.0f) + "\n"
       "    p = p * r + " + Exact(1.0f / 24.0f) + "\n"
       "    p = p * r + " + Exact(1.0f / 6.0f) + "\n"
       "    p = p * r + 0.5\n"
       "    p = p * r + 1.0\n"
       "    p = p * r + 1.0\n"
       // 2^n: the kernel writes n + 127 into the exponent bits; exp2 of an integer in
       // [-126, 127] is that power of two exactly (its reduction leaves 0, whose series is 1),
       // and TorchScript has no bit cast of a tensor (its view takes a shape only).
       "    return p * torch.exp2(n)\n";
  s += "def lane_sigmoid(self, z: Tensor) -> Tensor:\n"
       "    return torch.reciprocal(1.0 + self.lane_exp(-z))\n";
  s += "def lane_swish(self, z: Tensor) -> Tensor:\n"
       "    return z * self.lane_sigmoid(z)\n";
  s += "def lane_relu(self, z: Tensor) -> Tensor:\n"
       "    return torch.where((z > 0.0) | (z != z), z, torch.zeros_like(z))\n";
  s += "def lane_tanh(self, z: Tensor) -> Tensor:\n"
       "    t = self.lane_exp(-2.0 * torch.abs(z))\n"
       "    m = (1.0 - t) / (1.0 + t)\n"
       "    return torch.where(z < 0.0, -m, m)\n";
  s += "def lane_erf(self, x: Tensor) -> Tensor:\n"
       "    a = torch.abs(x)\n"
       "    t = torch.reciprocal(1.0 + " + erf_p + " * a)\n"
       "    p = torch.full_like(x, " + Exact(1.061405429f) + ")\n"
       "    p = p * t - " + Exact(1.453152027f) + "\n"
       "    p = p * t + " + Exact(1.421413741f) + "\n"
       "    p = p * t - " + Exact(0.284496736f) + "\n"
       "    p = p * t + " + Exact(0.254829592f) + "\n"
       "    r = 1.0 - (p * t) * self.lane_exp(-(a * a))\n"
       "    return torch.where(x < 0.0, -r, r)\n";
  s += "def lane_gelu(self, z: Tensor) -> Tensor:\n"
       "    return z * (0.5 * (1.0 + self.lane_erf(z * " + sqrt_half + ")))\n";
  return s;
}

const char* MethodOf(Activation act) {
  switch (act) {
    case Activation::kRelu: return "lane_relu";
    case Activation::kSigmoid: return "lane_sigmoid";
    case Activation::kSwish: return "lane_swish";
    case Activation::kTanh: return "lane_tanh";
    case Activation::kGelu: return "lane_gelu";
    case Activation::kLinear: return nullptr;
  }
  return nullptr;
}

}  // namespace

std::string LaneForwardSource(size_t layers, const std::vector<Activation>& activations) {
  std::string src;
  for (size_t l = 0; l < layers; ++l) {
    const std::string name = "self.layer" + std::to_string(l);
    src += "    h = self.lane_linear(h, " + name + "_weight, " + name + "_bias)\n";
    if (l + 1 == layers) break;
    if (const char* method = MethodOf(activations[l])) src += "    h = self." + std::string(method) + "(h)\n";
  }
  return src;
}

const std::string& LaneMethodsSource() {
  static const std::string methods = MakeMethods();
  return methods;
}

bool UsesLaneMethods(const std::string& forward_source) {
  return forward_source.find("self.lane_linear(") != std::string::npos;
}

}  // namespace ens
