// Tests of common/journal_follower: a RunProgress that follows a journal another writer appends
// to, reading only what is new; a record being written waits, a journal cut short or replaced
// is read again from its start, a bad line is an error naming it.
#include "common/state/journal_follower.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <string>

#include "support/temp_dir.h"

namespace ens {
namespace {

using ens::testing::TempDir;
using json = nlohmann::json;

void AppendText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::app) << text;
}

std::string Line(const json& j) { return j.dump() + "\n"; }

json Committed(int round) { return {{"event", "round_committed"}, {"round", round}, {"train_rows", 100 + round}}; }

TEST_CASE("a follower applies each appended record once and reads only what is new", "[journal]") {
  TempDir tmp;
  const std::string path = tmp / "journal.jsonl";
  JournalFollower f(path);
  CHECK(f.Update().code() == Status::Code::kNotFound);
  AppendText(path, Line({{"event", "run_started"}, {"train_rows", 100}}) + Line(Committed(0)));
  REQUIRE(f.Update().ok());
  CHECK(f.progress().started);
  CHECK(f.progress().committed.size() == 1);
  const uint64_t after_two = f.offset();
  REQUIRE(f.Update().ok());  // nothing new: nothing applied twice
  CHECK(f.progress().committed.size() == 1);
  CHECK(f.offset() == after_two);

  // A record half written waits for its newline.
  const std::string third = Line(Committed(1));
  AppendText(path, third.substr(0, 10));
  REQUIRE(f.Update().ok());
  CHECK(f.progress().committed.size() == 1);
  CHECK(f.offset() == after_two);
  AppendText(path, third.substr(10) + Line({{"event", "run_finished"}, {"rounds", 2}, {"reason", "all rounds done"}}));
  REQUIRE(f.Update().ok());
  CHECK(f.progress().committed.size() == 2);
  CHECK(f.progress().next_round == 2);
  CHECK(f.progress().finished);

  // What it follows equals a replay of the whole file.
  auto all = ReadJournal(path);
  REQUIRE(all.ok());
  const RunProgress replay = ReplayJournal(*all);
  CHECK(replay.committed == f.progress().committed);
  CHECK(replay.train_rows == f.progress().train_rows);
}

TEST_CASE("a journal cut short or replaced is followed again from its start", "[journal]") {
  TempDir tmp;
  const std::string path = tmp / "journal.jsonl";
  AppendText(path, Line({{"event", "run_started"}}) + Line(Committed(0)) + Line(Committed(1)));
  JournalFollower f(path);
  REQUIRE(f.Update().ok());
  CHECK(f.progress().committed.size() == 2);
  // Replaced by a shorter journal (another file renamed over it).
  const std::string other = tmp / "other.jsonl";
  AppendText(other, Line({{"event", "run_started"}}) + Line(Committed(0)));
  REQUIRE(std::rename(other.c_str(), path.c_str()) == 0);
  REQUIRE(f.Update().ok());
  CHECK(f.progress().committed.size() == 1);
  // The same file truncated below what was read.
  { std::ofstream(path, std::ios::binary | std::ios::trunc) << Line({{"event", "run_started"}}); }
  REQUIRE(f.Update().ok());
  CHECK(f.progress().started);
  CHECK(f.progress().committed.empty());
}

TEST_CASE("a line that is not a record stops the follower there, naming the line", "[journal]") {
  TempDir tmp;
  const std::string path = tmp / "journal.jsonl";
  AppendText(path, Line({{"event", "run_started"}}) + Line(Committed(0)) + "not json\n" + Line(Committed(1)));
  JournalFollower f(path);
  Status s = f.Update();
  REQUIRE(s.code() == Status::Code::kCorruption);
  CHECK(s.message() == path + ":3: not a journal record");
  CHECK(f.progress().committed.size() == 1);  // what came before it is applied
  CHECK(f.Update().message() == path + ":3: not a journal record");
}

}  // namespace
}  // namespace ens
