#include "common/config/served_run_config.h"

#include <algorithm>

#include <nlohmann/json.hpp>


namespace ens {

using json = nlohmann::json;

std::vector<ConfigError> ValidateServedRunConfig(const std::string& text, const std::string& base_dir,
                                                 const std::string& state_root, Config* out) {
  Config cfg;
  std::vector<ConfigError> errors = ValidateConfigText(text, base_dir, &cfg);
  auto missing = std::find_if(errors.begin(), errors.end(), [](const ConfigError& e) {
    return e.pointer == "/state_dir" && e.message == "is required";
  });
  if (missing == errors.end()) {
    if (errors.empty() && out != nullptr) *out = std::move(cfg);
    return errors;
  }
  errors.erase(missing);
  if (!errors.empty()) return errors;
  // Valid but for its state directory: the text parsed, and run_name (if any) is a valid name.
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  root["state_dir"] = state_root + "/" + root.value("run_name", std::string("ensembled"));
  return ValidateConfigText(root.dump(), base_dir, out);
}

}  // namespace ens
