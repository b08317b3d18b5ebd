// Tests of common/config/gpu_selection.h: the one rule that names a GPU in a list, and the one
// resolver run, serve and the grant pool share.
#include "common/config/gpu_selection.h"

#include <catch2/catch.hpp>

namespace ens {
namespace {

const std::vector<GpuCandidate> kFour = {{"GPU-aa11", 0}, {"GPU-aa22", 1}, {"GPU-bb33", 2}, {"GPU-cc44", 3}};

std::vector<std::string> Picked(const GpuSelection& sel, const std::vector<GpuCandidate>& usable = kFour) {
  auto ids = ResolveGpuSelection(sel, usable, "/resources/gpus", "these 4 GPUs");
  INFO((ids.ok() ? "" : ids.status().message()));
  REQUIRE(ids.ok());
  return *ids;
}

std::string Why(const GpuSelection& sel, const std::vector<GpuCandidate>& usable = kFour) {
  auto ids = ResolveGpuSelection(sel, usable, "/resources/gpus", "these 4 GPUs");
  REQUIRE_FALSE(ids.ok());
  CHECK(ids.status().code() == Status::Code::kInvalidArgument);
  return ids.status().message();
}

TEST_CASE("a list entry of digits is a physical index - anything else an id or its start", "[gpu][selection]") {
  CHECK(GpuEntryNames("2", {"GPU-bb33", 2}));
  CHECK_FALSE(GpuEntryNames("2", {"GPU-2xyz", 0}));  // digits are never a prefix
  CHECK(GpuEntryNames("GPU-bb", {"GPU-bb33", 2}));
  CHECK(GpuEntryNames("GPU-bb33", {"GPU-bb33", 2}));
  CHECK_FALSE(GpuEntryNames("GPU-bb34", {"GPU-bb33", 2}));
  CHECK_FALSE(GpuEntryNames("0", {"GPU-x", -1}));  // no index known
  CHECK_FALSE(GpuEntryNames("", {"GPU-x", 0}));
}

TEST_CASE("auto, none, a count and a list resolve against the usable devices", "[gpu][selection]") {
  CHECK(Picked(GpuSelection::Auto()) == std::vector<std::string>{"GPU-aa11", "GPU-aa22", "GPU-bb33", "GPU-cc44"});
  CHECK(Picked(GpuSelection::None()).empty());
  CHECK(Picked(GpuSelection::Auto(), {}).empty());
  CHECK(Picked(GpuSelection::Count(2)) == std::vector<std::string>{"GPU-aa11", "GPU-aa22"});
  CHECK(Picked(GpuSelection::List({"3", "GPU-aa2"})) == std::vector<std::string>{"GPU-cc44", "GPU-aa22"});
}

TEST_CASE("what cannot be resolved is an error at its pointer", "[gpu][selection]") {
  CHECK(Why(GpuSelection::Count(5)) == "/resources/gpus: asks 5 GPUs, more than these 4 GPUs");
  CHECK(Why(GpuSelection::List({"0", "7"})) == "/resources/gpus/1: '7' is none of these 4 GPUs");
  CHECK(Why(GpuSelection::List({"GPU-aa"})) == "/resources/gpus/0: 'GPU-aa' is more than one of these 4 GPUs");
  CHECK(Why(GpuSelection::List({"1", "GPU-aa22"})) == "/resources/gpus/1: 'GPU-aa22' names GPU GPU-aa22 again");
}

TEST_CASE("an index names each MIG instance of its GPU - a MIG id names one", "[gpu][selection]") {
  const std::vector<GpuCandidate> mig = {{"MIG-1111", 0}, {"MIG-2222", 0}, {"GPU-ff", 1}};
  CHECK(Picked(GpuSelection::List({"0"}), mig) == std::vector<std::string>{"MIG-1111", "MIG-2222"});
  CHECK(Picked(GpuSelection::List({"MIG-2"}), mig) == std::vector<std::string>{"MIG-2222"});
}

TEST_CASE("the config's form of each selection", "[gpu][selection]") {
  CHECK(GpuSelection::Auto().ToJson() == "auto");
  CHECK(GpuSelection::None().ToJson() == "none");
  CHECK(GpuSelection::Count(3).ToJson() == 3);
  CHECK(GpuSelection::List({"0", "GPU-a"}).ToJson() == nlohmann::json{"0", "GPU-a"});
}

}  // namespace
}  // namespace ens
