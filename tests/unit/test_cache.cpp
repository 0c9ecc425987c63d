//===- test_cache.cpp - the on-disk kernel cache --------------------------===//
#include <doctest/doctest.h>

#include "kiln/kiln.hpp"
#include "kiln/ops/softmax.hpp"
#include "kiln/runtime/detail/kernel_cache.hpp"
#include "support/temp_cache.hpp"
#include "support/temp_dir.hpp"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SHA256.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <sys/stat.h>
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

// Damaged and hostile entries. An entry's files are checked against its
// manifest before use: host.o is linked into the process, so a damaged one
// would run wrong or crash, and damaged IR would be shown as the kernel's.

namespace {
/// The folder of the only entry in `dir`.
fs::path only_entry(const fs::path &dir) {
  std::vector<fs::path> found;
  for (auto &e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("tmp-", 0) != 0)
      found.push_back(e.path());
  REQUIRE(found.size() == 1);
  return found[0];
}

/// Whether `dir` holds no temporary folders, left behind by a store.
bool no_temporaries(const fs::path &dir) {
  for (auto &e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("tmp-", 0) == 0)
      return false;
  return true;
}

std::string read_bytes(const fs::path &file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path &file, const std::string &bytes) {
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
}

/// Every name in an entry's folder with its bytes; anything but a regular
/// file (looked at without following symlinks, and never opened) reads as
/// a marker, so that snapshots compare equal only for intact entries.
std::map<std::string, std::string> snapshot(const fs::path &entry) {
  std::map<std::string, std::string> files;
  if (!fs::is_directory(fs::symlink_status(entry)))
    return {{"", "<not a folder>"}};
  for (auto &e : fs::directory_iterator(entry)) {
    std::string name = e.path().filename().string();
    files[name] = fs::is_regular_file(fs::symlink_status(e.path())) ? read_bytes(e.path())
                                                                     : "<not a regular file>";
  }
  return files;
}

void flip_byte(const fs::path &file, std::size_t offset) {
  std::string bytes = read_bytes(file);
  REQUIRE(offset < bytes.size());
  bytes[offset] = char(~bytes[offset]);
  write_bytes(file, bytes);
}

/// Runs `f` on a thread of its own. Should it still run after `seconds`,
/// blocked reading the FIFO `fifo`, a writer opens and closes the FIFO so
/// that the read ends, and the call counts as hung.
template <class F> bool finishes_without_blocking(F f, const fs::path &fifo, int seconds = 60) {
  auto done = std::async(std::launch::async, f);
  if (done.wait_for(std::chrono::seconds(seconds)) == std::future_status::ready) {
    done.get();
    return true;
  }
  while (done.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready)
    if (int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK); fd >= 0)
      ::close(fd);
  done.get();
  return false;
}
} // namespace

TEST_CASE("a damaged or tampered host entry is a miss, and the compilation that follows repairs it") {
  TempCache cache;
  test::TempDir copies("cache-test-copies");
  auto first = compile<CachedCpu>(Target::cpu());
  auto want = softmax_rows(first);
  fs::path entry = only_entry(cache.dir);
  const auto intact = snapshot(entry);
  auto size = [&](const char *name) { return std::size_t(fs::file_size(entry / name)); };

  // Byte 10 lies in the ELF header's padding, which the JIT's linker
  // ignores: without a checksum the damaged object would be linked and used.
  SUBCASE("a flipped byte in host.o's header padding") { flip_byte(entry / "host.o", 10); }
  SUBCASE("a flipped byte in the middle of host.o") {
    flip_byte(entry / "host.o", size("host.o") / 2);
  }
  SUBCASE("a flipped byte in the last byte of host.o") {
    flip_byte(entry / "host.o", size("host.o") - 1);
  }
  SUBCASE("a flipped byte in a stage's IR") { flip_byte(entry / "kiln.txt", size("kiln.txt") / 2); }
  SUBCASE("a stage's IR replaced") { write_bytes(entry / "llvm.txt", "; not this kernel's IR\n"); }
  SUBCASE("a flipped byte in the manifest") {
    REQUIRE(fs::exists(entry / "manifest"));
    flip_byte(entry / "manifest", size("manifest") / 2);
  }
  SUBCASE("host.o truncated to 0 bytes") { fs::resize_file(entry / "host.o", 0); }
  SUBCASE("a stage's IR truncated to 0 bytes") { fs::resize_file(entry / "lowered.txt", 0); }
  SUBCASE("host.o deleted") { fs::remove(entry / "host.o"); }
  SUBCASE("a stage's IR deleted") { fs::remove(entry / "llvm-dialect.txt"); }
  SUBCASE("the manifest deleted") {
    REQUIRE(fs::exists(entry / "manifest"));
    fs::remove(entry / "manifest");
  }
  SUBCASE("an extra file") { write_bytes(entry / "extra.txt", "extra"); }
  SUBCASE("a folder in place of host.o") {
    fs::remove(entry / "host.o");
    fs::create_directory(entry / "host.o");
  }
  // The symlinks point at intact copies: only following them is wrong.
  SUBCASE("a symlink in place of a file") {
    fs::copy_file(entry / "kiln.txt", fs::path(copies.path) / "kiln.txt");
    fs::remove(entry / "kiln.txt");
    fs::create_symlink(fs::path(copies.path) / "kiln.txt", entry / "kiln.txt");
  }
  SUBCASE("a symlink in place of the entry's folder") {
    fs::path copy = fs::path(copies.path) / "entry";
    fs::copy(entry, copy);
    fs::remove_all(entry);
    fs::create_directory_symlink(copy, entry);
  }

  CHECK_FALSE(KernelCache::load(entry.filename().string()));
  auto again = compile<CachedCpu>(Target::cpu());
  CHECK_FALSE(again.from_cache());
  CHECK(again.ir(Stage::Kiln) == first.ir(Stage::Kiln));
  CHECK(again.ir(Stage::LLVMIR) == first.ir(Stage::LLVMIR));
  CHECK(softmax_rows(again) == want);
  // Repaired: the entry on disk is the intact one again, and is used.
  CHECK(snapshot(entry) == intact);
  CHECK(KernelCache::load(entry.filename().string()));
  CHECK(no_temporaries(cache.dir));
  auto third = compile<CachedCpu>(Target::cpu());
  CHECK(third.from_cache());
  CHECK(third.ir(Stage::Kiln) == first.ir(Stage::Kiln));
  CHECK(softmax_rows(third) == want);
}

TEST_CASE("a damaged CUDA entry is a miss, and the compilation that follows repairs it") {
  TempCache cache;
  auto first = compile<Cached>(Target::cuda("sm_90a"));
  fs::path entry = only_entry(cache.dir);
  const auto intact = snapshot(entry);
  SUBCASE("a flipped byte in the PTX") {
    flip_byte(entry / "ptx.txt", std::size_t(fs::file_size(entry / "ptx.txt")) / 2);
  }
  SUBCASE("the PTX truncated to 0 bytes") { fs::resize_file(entry / "ptx.txt", 0); }
  SUBCASE("the PTX deleted") { fs::remove(entry / "ptx.txt"); }
  auto again = compile<Cached>(Target::cuda("sm_90a"));
  CHECK_FALSE(again.from_cache());
  CHECK(again.ir(Stage::Ptx) == first.ir(Stage::Ptx));
  CHECK(snapshot(entry) == intact);
  CHECK(compile<Cached>(Target::cuda("sm_90a")).from_cache());
}

TEST_CASE("a FIFO in place of an entry's file is a miss, not a hang, and is replaced") {
  TempCache cache;
  auto first = compile<CachedCpu>(Target::cpu());
  auto want = softmax_rows(first);
  fs::path entry = only_entry(cache.dir);
  const auto intact = snapshot(entry);
  fs::path fifo;
  SUBCASE("host.o") { fifo = entry / "host.o"; }
  SUBCASE("a stage's IR") { fifo = entry / "kiln.txt"; }
  SUBCASE("the manifest") { fifo = entry / "manifest"; }
  SUBCASE("the entry's folder") { fifo = entry; }
  fs::remove_all(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);

  // Every compilation is watched: one that is not repaired blocks again.
  auto compiled = [&] {
    std::optional<Kernel<CachedCpu>> k;
    CHECK(finishes_without_blocking([&] { k.emplace(compile<CachedCpu>(Target::cpu())); }, fifo));
    return k;
  };
  auto again = compiled();
  REQUIRE(again);
  CHECK_FALSE(again->from_cache());
  CHECK(softmax_rows(*again) == want);
  CHECK(snapshot(entry) == intact);
  auto third = compiled();
  REQUIRE(third);
  CHECK(third->from_cache());
}

TEST_CASE("an entry copied under another key is not that key's entry") {
  TempCache cache;
  compile<CachedCpu>(Target::cpu());
  fs::path entry = only_entry(cache.dir);
  std::string other = KernelCache::key({"another kernel"});
  fs::copy(entry, cache.dir / other);
  CHECK(KernelCache::load(entry.filename().string()));
  CHECK_FALSE(KernelCache::load(other));
  // What is compiled under that key replaces the copy.
  KernelCache::Entry mine{{{Stage::Ptx, "// another kernel's PTX\n"}}, ""};
  KernelCache::store(other, mine);
  auto back = KernelCache::load(other);
  REQUIRE(back);
  CHECK(back->stages == mine.stages);
  CHECK(back->object.empty());
}

TEST_CASE("a store replaces a damaged entry and keeps an intact one") {
  TempCache cache;
  std::string key = KernelCache::key({"a kernel"});
  KernelCache::Entry a{{{Stage::Kiln, "a"}, {Stage::Ptx, "// a\n"}}, ""};
  KernelCache::Entry b{{{Stage::Kiln, "b"}, {Stage::Ptx, "// b\n"}}, ""};
  KernelCache::store(key, a);
  KernelCache::store(key, b); // another process won the race: theirs stays
  REQUIRE(KernelCache::load(key));
  CHECK(KernelCache::load(key)->stages == a.stages);
  write_bytes(cache.dir / key / "ptx.txt", "// damaged\n");
  CHECK_FALSE(KernelCache::load(key));
  KernelCache::store(key, b);
  REQUIRE(KernelCache::load(key));
  CHECK(KernelCache::load(key)->stages == b.stages);
  CHECK(no_temporaries(cache.dir));
  // Keys that are not digests name no entry, and never a path outside.
  KernelCache::store("../escaped", a);
  CHECK_FALSE(fs::exists(cache.dir.parent_path() / "escaped"));
  CHECK_FALSE(KernelCache::load("../escaped"));
}

TEST_CASE("entries replaced while others read them are never seen half-written") {
  TempCache cache;
  std::string key = KernelCache::key({"a busy kernel"});
  auto make = [](char c) {
    KernelCache::Entry e;
    for (Stage s : {Stage::Kiln, Stage::Lowered, Stage::LLVMDialect, Stage::LLVMIR, Stage::Ptx})
      e.stages[s] = std::string(64 << 10, c);
    return e;
  };
  const KernelCache::Entry a = make('a'), b = make('b');
  std::atomic<bool> stop = false;
  std::atomic<int> torn = 0, hits = 0;
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w)
    threads.emplace_back([&, w] {
      for (int i = 0; i < 40; ++i) {
        write_bytes(cache.dir / key / "ptx.txt", "damaged");
        KernelCache::store(key, (i + w) % 2 ? a : b);
      }
    });
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&] {
      while (!stop)
        if (auto e = KernelCache::load(key)) {
          ++hits;
          torn += !(e->stages == a.stages || e->stages == b.stages);
        }
    });
  for (int i = 0; i < 2; ++i)
    threads[i].join();
  stop = true;
  for (std::size_t i = 2; i < threads.size(); ++i)
    threads[i].join();
  CHECK(torn.load() == 0);
  MESSAGE(hits.load() << " reads of an intact entry while it was replaced");
  KernelCache::store(key, a);
  CHECK(KernelCache::load(key));
  CHECK(no_temporaries(cache.dir));
}

// The reader as a function of bytes: what a fuzzer calls.

namespace {
std::string sha256_hex(std::string_view bytes) {
  return llvm::toHex(llvm::SHA256::hash(llvm::ArrayRef<uint8_t>(
                         reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size())),
                     /*LowerCase=*/true);
}

/// `manifest` with its lines above the seal edited by `edit` and sealed
/// again, as a writer of another format (or a forger) would.
template <class Edit> std::string resealed(const std::string &manifest, Edit edit) {
  std::string body = manifest.substr(0, manifest.rfind("end "));
  edit(body);
  return body + "end " + sha256_hex(body) + "\n";
}

struct Sample {
  std::string key = KernelCache::key({"a sample kernel"});
  KernelCache::Entry entry{{{Stage::Kiln, "kiln IR\n"}, {Stage::LLVMIR, "llvm IR\n"}},
                           std::string("\x7f" "ELF object code\0\1\2", 19)};
  std::map<std::string, std::string> files = KernelCache::files_of(entry);
  std::string manifest = KernelCache::make_manifest(key, files);
};
} // namespace

TEST_CASE("parse_entry accepts exactly what store writes") {
  Sample s;
  CHECK(s.manifest.rfind(std::string(KernelCache::kManifestFormat) + "\nkey " + s.key + "\n", 0) == 0);
  // The last line is the SHA-256 of every byte above it.
  std::string body = s.manifest.substr(0, s.manifest.rfind("end "));
  CHECK(s.manifest == body + "end " + sha256_hex(body) + "\n");
  CHECK(KernelCache::seal_manifest(body) == s.manifest);
  auto e = KernelCache::parse_entry(s.key, s.manifest, s.files);
  REQUIRE(e);
  CHECK(e->stages == s.entry.stages);
  CHECK(e->object == s.entry.object);
  CHECK(KernelCache::parse_manifest(s.key, s.manifest)->size() == 3);

  SUBCASE("another key") { CHECK_FALSE(KernelCache::parse_entry(KernelCache::key({"x"}), s.manifest, s.files)); }
  SUBCASE("a key that is no digest") { CHECK_FALSE(KernelCache::parse_entry("../x", s.manifest, s.files)); }
  SUBCASE("a file missing") {
    s.files.erase("host.o");
    CHECK_FALSE(KernelCache::parse_entry(s.key, s.manifest, s.files));
  }
  SUBCASE("a file too many") {
    s.files["ptx.txt"] = "";
    CHECK_FALSE(KernelCache::parse_entry(s.key, s.manifest, s.files));
  }
  SUBCASE("every byte of the manifest flipped, one at a time") {
    for (std::size_t i = 0; i < s.manifest.size(); ++i)
      for (int bit = 0; bit < 8; ++bit) {
        std::string m = s.manifest;
        m[i] = char(m[i] ^ (1 << bit));
        CHECK_FALSE(KernelCache::parse_entry(s.key, m, s.files));
      }
  }
  SUBCASE("every byte of every file flipped, one at a time") {
    for (auto &[name, bytes] : s.files)
      for (std::size_t i = 0; i < bytes.size(); ++i) {
        auto files = s.files;
        files[name][i] = char(files[name][i] ^ 0x40);
        CHECK_FALSE(KernelCache::parse_entry(s.key, s.manifest, files));
      }
  }
  SUBCASE("the manifest cut short or lengthened") {
    for (std::size_t n = 0; n < s.manifest.size(); ++n)
      CHECK_FALSE(KernelCache::parse_entry(s.key, s.manifest.substr(0, n), s.files));
    CHECK_FALSE(KernelCache::parse_entry(s.key, s.manifest + "\n", s.files));
    CHECK_FALSE(KernelCache::parse_entry(s.key, s.manifest + s.manifest, s.files));
  }
  SUBCASE("an older format, correctly sealed") {
    auto m = resealed(s.manifest, [](std::string &b) { b.replace(b.find(" 1\n"), 3, " 0\n"); });
    CHECK_FALSE(KernelCache::parse_entry(s.key, m, s.files));
  }
  SUBCASE("a sealed manifest naming a file an entry may not have") {
    auto m = resealed(s.manifest, [](std::string &b) { b.replace(b.find("host.o"), 6, "../h.o"); });
    s.files["../h.o"] = s.files["host.o"];
    s.files.erase("host.o");
    CHECK_FALSE(KernelCache::parse_entry(s.key, m, s.files));
  }
  SUBCASE("a sealed manifest with files out of order, or twice") {
    auto swapped = resealed(s.manifest, [](std::string &b) {
      std::size_t first = b.find("file "), second = b.find("file ", first + 1);
      std::size_t end = b.find('\n', second) + 1;
      b = b.substr(0, first) + b.substr(second, end - second) + b.substr(first, second - first) +
          b.substr(end);
    });
    CHECK_FALSE(KernelCache::parse_entry(s.key, swapped, s.files));
    auto twice = resealed(s.manifest, [](std::string &b) {
      std::size_t first = b.find("file ");
      b.insert(first, b.substr(first, b.find('\n', first) + 1 - first));
    });
    CHECK_FALSE(KernelCache::parse_entry(s.key, twice, s.files));
  }
  SUBCASE("a sealed manifest with a size written differently") {
    auto m = resealed(s.manifest, [](std::string &b) {
      std::size_t at = b.find("host.o ") + 7;
      b.insert(at, "0");
    });
    CHECK_FALSE(KernelCache::parse_entry(s.key, m, s.files));
  }
  SUBCASE("a sealed manifest promising more than any file may hold") {
    std::string huge = std::to_string(KernelCache::kMaxFileBytes + 1);
    auto m = resealed(s.manifest, [&](std::string &b) {
      std::size_t at = b.find("host.o ") + 7;
      b.replace(at, b.find(' ', at) - at, huge);
    });
    CHECK_FALSE(KernelCache::parse_manifest(s.key, m));
  }
  SUBCASE("an entry with neither PTX nor object code") {
    KernelCache::Entry ir_only{{{Stage::Kiln, "kiln IR\n"}}, ""};
    auto files = KernelCache::files_of(ir_only);
    CHECK_FALSE(KernelCache::parse_entry(s.key, KernelCache::make_manifest(s.key, files), files));
  }
  SUBCASE("sealed manifests edited at random yield the entry or nothing") {
    std::mt19937 rng(1);
    std::string body = s.manifest.substr(0, s.manifest.rfind("end "));
    const char alphabet[] = "0123456789abcdef \nfilekyhost.ktx\0\xff";
    int accepted = 0;
    for (int i = 0; i < 2000; ++i) {
      std::string b = body;
      for (int edits = 1 + int(rng() % 3); edits > 0 && !b.empty(); --edits) {
        std::size_t at = rng() % b.size();
        char c = alphabet[rng() % (sizeof alphabet - 1)];
        switch (rng() % 3) {
        case 0: b[at] = c; break;
        case 1: b.insert(b.begin() + at, c); break;
        default: b.erase(at, 1 + rng() % 4); break;
        }
      }
      auto e = KernelCache::parse_entry(s.key, KernelCache::seal_manifest(b), s.files);
      if (e) {
        ++accepted;
        CHECK(b == body);
        CHECK(e->stages == s.entry.stages);
        CHECK(e->object == s.entry.object);
      }
    }
    MESSAGE(accepted << " of 2000 edits left the manifest as it was");
  }
  SUBCASE("a manifest over the size limit") {
    std::string big = s.manifest + std::string(KernelCache::kMaxManifestBytes, '\n');
    CHECK_FALSE(KernelCache::parse_manifest(s.key, big));
  }
}
