//===- test_autotune.cpp - the autotuner (on the CPU target) --------------===//
#include <doctest/doctest.h>

#include "kiln/autotuner/autotune.hpp"
#include "kiln/ops/elementwise.hpp"
#include "support/temp_cache.hpp"

#include <cstdlib>
#include <filesystem>
#include <unistd.h>

using namespace kiln;
namespace fs = std::filesystem;

namespace {
struct Broken {
  static constexpr int BLOCK = 64;
  void operator()(Ptr<f32> x, Ptr<f32> y, Ptr<f32> out, I32 n) const {
    throw Error("this configuration cannot be built");
  }
};

struct TempCache : test::TempCache {
  TempCache() : test::TempCache("tune-test") {}
};

struct Problem {
  int n = 1 << 16;
  std::vector<float> x = std::vector<float>(n, 1.f), y = std::vector<float>(n, 2.f),
                     out = std::vector<float>(n, 0.f);
  int launches = 0;
  auto launcher() {
    return [this](const auto &k) {
      using K = typename std::decay_t<decltype(k)>::kernel_type;
      ++launches;
      k.launch(Grid(ceil_div(n, K::BLOCK)), x.data(), y.data(), out.data(), n);
    };
  }
};
} // namespace

TEST_CASE("tuning times every candidate, skips broken ones and persists the winner") {
  TempCache cache;
  Problem p;
  auto tuned = autotune<ops::VecAdd<f32, 64>, Broken, ops::VecAdd<f32, 1024>>(
      Target::cpu(), "n=65536", {4}, p.launcher());
  REQUIRE(tuned.results().size() == 3);
  CHECK_FALSE(tuned.from_disk());
  int failed = 0;
  for (auto &r : tuned.results()) {
    if (r.label.rfind("Broken", 0) == 0) {
      CHECK(std::isinf(r.ms));
      CHECK(r.error.find("cannot be built") != std::string::npos);
      ++failed;
    } else {
      CHECK(r.ms > 0);
      CHECK(r.ms < 1e9);
    }
  }
  CHECK(failed == 1);
  CHECK(tuned.label().rfind("VecAdd_f32_", 0) == 0);
  tuned.run();
  CHECK(p.out[p.n - 1] == 3.f);
  CHECK(fs::exists(tuning_directory()));

  // A later run reuses the persisted winner: one compile, no timing.
  Problem q;
  auto again = autotune<ops::VecAdd<f32, 64>, Broken, ops::VecAdd<f32, 1024>>(
      Target::cpu(), "n=65536", {4}, q.launcher());
  CHECK(again.from_disk());
  CHECK(again.label() == tuned.label());
  CHECK(again.results().empty());
  CHECK(q.launches == 0);
  again.run();
  CHECK(q.launches == 1);
}

TEST_CASE("a winner tuned as a chain of launches persists apart from one timed alone") {
  TempCache cache;
  Problem p;
  auto chained = autotune<ops::VecAdd<f32, 64>, ops::VecAdd<f32, 1024>>(Target::cpu(), "chain", {4},
                                                                        p.launcher(), {}, TuneTiming{8});
  CHECK_FALSE(chained.from_disk());
  Problem q;
  auto alone = autotune<ops::VecAdd<f32, 64>, ops::VecAdd<f32, 1024>>(Target::cpu(), "chain", {4}, q.launcher());
  CHECK_FALSE(alone.from_disk()); // another key: tuned again
  auto again = autotune<ops::VecAdd<f32, 64>, ops::VecAdd<f32, 1024>>(Target::cpu(), "chain", {4}, q.launcher(),
                                                                      {}, TuneTiming{8});
  CHECK(again.from_disk());
  CHECK(again.label() == chained.label());
}

TEST_CASE("pruning drops candidates and an all-failing space is a clear error") {
  TempCache cache;
  Problem p;
  auto tuned = autotune<ops::VecAdd<f32, 64>, ops::VecAdd<f32, 1024>>(
      Target::cpu(), "pruned", {4}, p.launcher(),
      [](const std::string &label) { return label.find("_64") != std::string::npos; });
  CHECK(tuned.results().size() == 1);
  CHECK(tuned.label() == "VecAdd_f32_1024/w1");
  CHECK_THROWS_WITH_AS(autotune<Broken>(Target::cpu(), "broken", {4}, p.launcher()),
                       doctest::Contains("every candidate for 'broken' failed"), Error);
}
