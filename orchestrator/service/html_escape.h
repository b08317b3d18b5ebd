// HtmlEscape: text made safe for HTML content and attribute values (& < > " escaped), for every
// page the daemons serve (the run's status page, the serve daemon's pages). Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace ens {

inline std::string HtmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace ens
