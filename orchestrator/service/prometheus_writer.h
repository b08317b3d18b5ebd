// PrometheusWriter: the text exposition format of /metrics, for both endpoints (a run's
// supervisor: prometheus_metrics.cpp; the serve daemon: serve_http.cpp). A family's HELP and
// TYPE lines, then its samples; numbers with 17 significant digits and the format's spellings of
// the non-finite values. PrometheusLabel escapes a label value (backslash, quote, newline).
// Not thread-safe (one writer a response).
#pragma once

#include <cmath>
#include <iomanip>
#include <sstream>
#include <string>
#include <string_view>

namespace ens {

inline std::string PrometheusLabel(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

class PrometheusWriter {
 public:
  void Family(const std::string& name, const char* type, const std::string& help) {
    out_ << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  }
  // `labels`: name="value" pairs joined by commas (values through PrometheusLabel), or "".
  void Sample(const std::string& name, double v, const std::string& labels = "") {
    out_ << std::setprecision(17) << name;
    if (!labels.empty()) out_ << "{" << labels << "}";
    // The exposition format's spellings of the non-finite values (a round summary without an
    // error, say, is +Inf), which the stream would write as "inf" and "nan".
    if (std::isnan(v))
      out_ << " NaN\n";
    else if (std::isinf(v))
      out_ << (v > 0 ? " +Inf\n" : " -Inf\n");
    else
      out_ << " " << v << "\n";
  }
  // Samples another writer wrote (a family's, gathered apart), as they are.
  void Text(const std::string& samples) { out_ << samples; }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

}  // namespace ens
