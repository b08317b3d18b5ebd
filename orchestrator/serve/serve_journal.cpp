#include "orchestrator/serve/serve_journal.h"

#include <algorithm>

namespace ens {

using json = nlohmann::json;

ServeJournalState ReplayServeJournal(const std::vector<json>& records) {
  ServeJournalState st;
  for (const json& r : records) {
    if (!r.is_object() || !r.contains("run") || !r["run"].is_string()) continue;
    std::string event = r.value("event", ""), name = r["run"].get<std::string>();
    if (event == "submitted") {
      JournaledRun run;
      run.name = name;
      run.file = r.value("file", "");
      run.priority = r.value("priority", 0);
      run.seq = r.value("seq", uint64_t{0});
      run.uid = r.value("uid", uid_t{0});
      st.next_seq = std::max(st.next_seq, run.seq + 1);
      st.runs[name] = run;
    } else if (auto it = st.runs.find(name); it != st.runs.end()) {
      if (event == "started") {
        it->second.started = true;
      } else if (event == "preempted") {  // back in the queue: not among those that resume first
        it->second.started = false;
        it->second.preemptions += 1;
      } else if (event == "ended") {
        it->second.ended = true;
        it->second.end_state = r.value("state", "");
        it->second.end_reason = r.value("reason", "");
      }
    }
  }
  return st;
}

json SubmittedRecord(const std::string& run, const std::string& file, int priority, uint64_t seq, uid_t uid) {
  return {{"event", "submitted"}, {"run", run}, {"file", file}, {"priority", priority}, {"seq", seq}, {"uid", uid}};
}

json StartedRecord(const std::string& run, const std::vector<std::string>& gpus, int cpu_workers, pid_t pid) {
  return {{"event", "started"}, {"run", run}, {"gpus", gpus}, {"cpu_workers", cpu_workers}, {"pid", pid}};
}

json PreemptedRecord(const std::string& run, const std::string& by, const std::string& reason) {
  return {{"event", "preempted"}, {"run", run}, {"by", by}, {"reason", reason}};
}

json EndedRecord(const std::string& run, const std::string& state, const std::string& reason) {
  return {{"event", "ended"}, {"run", run}, {"state", state}, {"reason", reason}};
}

}  // namespace ens
