// ensemblectl submit | list | cancel, and the per-run commands given a run NAME and the daemon's
// --socket: the queue of `ensembled serve`, over its control socket (orchestrator/serve/serve_daemon.h,
// serve_run_commands.cpp). The daemon answers with the caller's uid from the socket
// (SO_PEERCRED): only a run's submitter or root may cancel, stop, pause, resume or reload it.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include "common/base/atomic_file.h"
#include "common/base/exit_codes.h"
#include "ctl/commands.h"
#include "common/ipc/control_client.h"

namespace ens::ctl {
namespace {

using json = nlohmann::json;

// One request; prints the daemon's refusal (every config error) or its message. The reply, or
// nullopt after printing why there is none.
std::optional<json> Ask(const std::string& socket, const std::string& what, const json& request, int* code) {
  auto reply = ControlRequest(socket, request);
  if (!reply.ok()) {
    std::cerr << "ensemblectl " << what << ": " << reply.status().message() << "\n";
    *code = exit_code::kTransientFailure;
    return std::nullopt;
  }
  if (!reply->value("ok", false)) {
    std::cerr << "ensemblectl " << what << ": " << reply->value("error", "refused") << "\n";
    if (reply->contains("errors") && (*reply)["errors"].size() > 1)
      for (const json& e : (*reply)["errors"])
        std::cerr << "  " << e.value("pointer", "/") << ": " << e.value("message", "") << "\n";
    *code = exit_code::kPermanentFailure;
    return std::nullopt;
  }
  *code = exit_code::kOk;
  return *reply;
}

std::string Granted(const json& r) {
  if (r.value("state", "") == "rejected") return "-";
  return (r.value("granted", false) ? "" : "asks ") + r.value("resources", "?");
}

std::string Progress(const json& r) {
  if (!r.contains("rounds")) return "-";
  std::string p = std::to_string(r.value("rounds_done", 0)) + "/" + std::to_string(r.value("rounds", 0)) + " rounds";
  if (r.value("members_done", 0) > 0)
    p += ", " + std::to_string(r.value("members_done", 0)) + "/" + std::to_string(r.value("members", 0)) + " members";
  return p;
}

}  // namespace

int Submit(const std::string& socket, const std::string& file, int priority) {
  auto text = ReadFile(file);
  if (!text.ok()) {
    std::cerr << "ensemblectl submit: " << text.status().message() << "\n";
    return exit_code::kPermanentFailure;
  }
  std::error_code ec;
  std::string base_dir = std::filesystem::absolute(file, ec).parent_path().string();
  int code = 0;
  auto reply = Ask(socket, "submit", {{"cmd", "submit"}, {"config", *text}, {"base_dir", base_dir}, {"priority", priority}}, &code);
  if (reply) std::cout << reply->value("message", "submitted") << "\n";
  return code;
}

int ListRuns(const std::string& socket, bool as_json) {
  int code = 0;
  auto reply = Ask(socket, "list", {{"cmd", "list"}}, &code);
  if (!reply) return code;
  if (as_json) {
    std::cout << json{{"runs", (*reply)["runs"]}}.dump(2) << "\n";
    return code;
  }
  std::printf("%-24s %-10s %4s %-28s %-26s %s\n", "NAME", "STATE", "PRIO", "RESOURCES", "PROGRESS", "REASON");
  for (const json& r : (*reply)["runs"]) {
    std::printf("%-24s %-10s %4d %-28s %-26s %s\n", r.value("name", "?").c_str(), r.value("state", "?").c_str(),
                r.value("priority", 0), Granted(r).c_str(), Progress(r).c_str(), r.value("reason", "").c_str());
    if (r.contains("errors"))
      for (const json& e : r["errors"])
        std::printf("    %s: %s\n", e.value("pointer", "").empty() ? "/" : e.value("pointer", "").c_str(),
                    e.value("message", "").c_str());
  }
  return code;
}

int CancelRun(const std::string& socket, const std::string& name) {
  int code = 0;
  auto reply = Ask(socket, "cancel", {{"cmd", "cancel"}, {"run", name}}, &code);
  if (reply) std::cout << reply->value("message", "cancelled") << "\n";
  return code;
}

int ServedRunAction(const std::string& socket, const std::string& name, const std::string& action) {
  int code = 0;
  auto reply = Ask(socket, action, {{"cmd", "run"}, {"run", name}, {"action", action}}, &code);
  if (reply) std::cout << reply->value("message", "ok") << "\n";
  return code;
}

std::optional<json> AskServedRun(const std::string& socket, const std::string& name, const std::string& action,
                                 const std::string& what, int* code) {
  auto reply = Ask(socket, what, {{"cmd", "run"}, {"run", name}, {"action", action}}, code);
  if (!reply) return std::nullopt;
  if (!reply->contains("run") || !(*reply)["run"].is_object()) {
    std::cerr << "ensemblectl " << what << ": the daemon at " << socket << " gave no run in its answer\n";
    *code = exit_code::kTransientFailure;
    return std::nullopt;
  }
  return *reply;
}

std::string StateDirOf(const std::string& state_dir, const std::string& socket, const std::string& name,
                       const std::string& what, int* code) {
  *code = exit_code::kOk;
  if (name.empty()) return state_dir;
  auto reply = AskServedRun(socket, name, "locate", what, code);
  if (!reply) return "";
  std::string dir = (*reply)["run"].value("state_dir", "");
  if (dir.empty()) {
    std::cerr << "ensemblectl " << what << ": run '" << name << "' has no state directory\n";
    *code = exit_code::kPermanentFailure;
  }
  return dir;
}

}  // namespace ens::ctl
