// libFuzzer target: a run's journal (common/state/journal.h) on arbitrary file contents.
//
// What `ensembled run` (resume), `ensemblectl status` and the serve daemon do with a journal:
// ReadJournal, then ReplayJournal and each record type's reader. Reading must accept or refuse
// every file without a crash; every record it accepts is an object with a string "event"; a
// replay, and each typed reader on every record, must not throw or invoke undefined behaviour
// (a field of another type, or a number outside its field's range, reads as the default).
#include <cstddef>
#include <cstdint>

#include "common/state/journal.h"
#include "fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ens::fuzz::ScratchFile file(".jsonl");
  const std::string& path = file.Write(data, size);
  auto records = ens::ReadJournal(path);
  if (!records.ok()) return 0;
  for (const nlohmann::json& r : records.value()) {
    if (!r.is_object() || !r.contains("event") || !r["event"].is_string()) __builtin_trap();
    (void)ens::MemberDoneFrom(r);
    (void)ens::MemberFailedFrom(r);
    (void)ens::RoundCommittedFrom(r);
    (void)ens::MutationAppliedFrom(r);
    (void)ens::ConfigChangedFrom(r);
    ens::RoundPrunedRecord pruned;
    (void)ens::RoundPrunedFrom(r, &pruned);
  }
  const ens::RunProgress progress = ens::ReplayJournal(records.value());
  if (progress.next_round < 0) __builtin_trap();  // a round is only ever counted up from 0
  return 0;
}
