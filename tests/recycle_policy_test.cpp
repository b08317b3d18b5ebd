#include "common/config/recycle_policy.h"

#include <catch2/catch.hpp>

namespace ens {
namespace {

RecycleSpec Off() {
  RecycleSpec s;
  s.after_tasks = 0;
  s.rss_mb = 0;
  s.rss_growth_pct = 0;
  s.gpu_reserved_mb = 0;
  return s;
}

TEST_CASE("recycle after N tasks, not before", "[recycle]") {
  RecycleSpec s = Off();
  s.after_tasks = 3;
  RecyclePolicy p(s);
  CHECK(p.AfterTask({100000, 0}).empty());
  CHECK(p.AfterTask({100000, 0}).empty());
  std::string why = p.AfterTask({100000, 0});
  CHECK(why.find("3 tasks") != std::string::npos);
}

TEST_CASE("recycle when RSS passes the absolute limit", "[recycle]") {
  RecycleSpec s = Off();
  s.rss_mb = 500;
  RecyclePolicy p(s);
  CHECK(p.AfterTask({400 * 1024, 0}).empty());
  CHECK(p.AfterTask({500 * 1024, 0}).empty());  // at the limit is fine
  CHECK(p.AfterTask({501 * 1024, 0}).find("recycle.rss_mb") != std::string::npos);
}

TEST_CASE("recycle when RSS grew past the percentage over the first task's", "[recycle]") {
  RecycleSpec s = Off();
  s.rss_growth_pct = 10;
  RecyclePolicy p(s);
  CHECK(p.AfterTask({1000000, 0}).empty());  // baseline
  CHECK(p.AfterTask({1090000, 0}).empty());
  CHECK(p.AfterTask({1100000, 0}).empty());  // exactly +10%
  std::string why = p.AfterTask({1110000, 0});
  CHECK(why.find("11.0%") != std::string::npos);
}

TEST_CASE("recycle when the GPU reserve passes the limit", "[recycle]") {
  RecycleSpec s = Off();
  s.gpu_reserved_mb = 1024;
  RecyclePolicy p(s);
  CHECK(p.AfterTask({1, 1024 * 1024}).empty());
  CHECK(p.AfterTask({1, 2048 * 1024}).find("GPU reserved") != std::string::npos);
}

TEST_CASE("with every limit off a worker is never recycled", "[recycle]") {
  RecyclePolicy p(Off());
  for (int i = 0; i < 5000; ++i) REQUIRE(p.AfterTask({int64_t{1} << 40, int64_t{1} << 40}).empty());
  CHECK(p.tasks_done() == 5000);
}

}  // namespace
}  // namespace ens
