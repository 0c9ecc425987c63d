//===- test_cache.cpp - the on-disk kernel cache --------------------------===//
#include <doctest/doctest.h>

#include "kiln/kiln.hpp"
#include "kiln/ops/softmax.hpp"
#include "../support/temp_cache.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>
#include <unistd.h>

using namespace kiln;
namespace fs = std::filesystem;

namespace {
struct TempCache : test::TempCache {
  TempCache() : test::TempCache("cache-test") {}
  int entries() const {
    int n = 0;
    if (fs::exists(dir))
      for (auto &e : fs::directory_iterator(dir))
        n += e.is_directory() && e.path().filename().string().rfind("tmp-", 0) != 0;
    return n;
  }
};
using Cached = ops::Softmax<f16, 256>;
} // namespace

TEST_CASE("the second compilation of a kernel is a cache hit with the same PTX") {
  TempCache cache;
  auto first = compile<Cached>(Target::cuda("sm_90a"));
  CHECK_FALSE(first.from_cache());
  CHECK(cache.entries() == 1);
  auto second = compile<Cached>(Target::cuda("sm_90a"));
  CHECK(second.from_cache());
  CHECK(second.ir(Stage::Ptx) == first.ir(Stage::Ptx));
  CHECK(second.ir(Stage::Kiln) == first.ir(Stage::Kiln));
  MESSAGE("cold compile " << first.compile_seconds() * 1e3 << " ms, warm " << second.compile_seconds() * 1e3 << " ms");
}

TEST_CASE("the key covers target and options") {
  TempCache cache;
  compile<Cached>(Target::cuda("sm_90a"));
  CHECK_FALSE(compile<Cached>(Target::cuda("sm_80")).from_cache());
  CompileOptions eight;
  eight.num_warps = 8;
  CHECK_FALSE(compile<Cached>(Target::cuda("sm_90a"), eight).from_cache());
  CompileOptions off;
  off.use_cache = false;
  CHECK_FALSE(compile<Cached>(Target::cuda("sm_90a"), off).from_cache());
  CHECK(cache.entries() == 3);
}

TEST_CASE("concurrent compilations of one kernel publish one complete entry") {
  TempCache cache;
  std::vector<std::thread> threads;
  std::vector<std::string> ptx(4);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] { ptx[i] = compile<Cached>(Target::cuda("sm_90a")).ir(Stage::Ptx); });
  for (auto &t : threads)
    t.join();
  for (auto &p : ptx)
    CHECK(p == ptx[0]);
  CHECK(cache.entries() == 1);
  CHECK(compile<Cached>(Target::cuda("sm_90a")).from_cache());
}

TEST_CASE("an unwritable cache folder is skipped, not an error") {
  ::setenv("KILN_CACHE_DIR", "/proc/kiln-cannot-write-here", 1);
  CHECK_NOTHROW(compile<Cached>(Target::cuda("sm_90a")));
  ::unsetenv("KILN_CACHE_DIR");
}

namespace {
/// Softmax of 3 rows of 100 columns with `k`.
template <class K> std::vector<float> softmax_rows(const K &k) {
  std::vector<float> x(300), y(300, 0.0f);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = float(i % 17) * 0.25f - 2.0f;
  k.launch(Grid(3), x.data(), y.data(), 100, 100, 100);
  return y;
}
using CachedCpu = ops::Softmax<f32, 128>;
} // namespace

TEST_CASE("a host kernel's second compilation links the cached machine code") {
  TempCache cache;
  auto first = compile<CachedCpu>(Target::cpu());
  CHECK_FALSE(first.from_cache());
  REQUIRE(cache.entries() == 1);
  for (auto &e : fs::directory_iterator(cache.dir))
    CHECK(fs::file_size(e.path() / "host.o") > 0);
  auto second = compile<CachedCpu>(Target::cpu());
  CHECK(second.from_cache());
  CHECK(second.ir(Stage::LLVMIR) == first.ir(Stage::LLVMIR));
  auto want = softmax_rows(first);
  CHECK(softmax_rows(second) == want);
  CHECK(want[0] > 0.0f);
  MESSAGE("host compile " << first.compile_seconds() * 1e3 << " ms, from the cache "
                          << second.compile_seconds() * 1e3 << " ms");
}

TEST_CASE("a damaged host entry is compiled again and replaced") {
  TempCache cache;
  auto first = compile<CachedCpu>(Target::cpu());
  for (auto &e : fs::directory_iterator(cache.dir))
    std::ofstream(e.path() / "host.o", std::ios::binary) << "not an object file";
  auto again = compile<CachedCpu>(Target::cpu());
  CHECK_FALSE(again.from_cache());
  CHECK(softmax_rows(again) == softmax_rows(first));
  auto third = compile<CachedCpu>(Target::cpu());
  CHECK(third.from_cache());
  CHECK(softmax_rows(third) == softmax_rows(first));
}
