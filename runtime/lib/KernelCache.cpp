//===- KernelCache.cpp - content-addressed on-disk kernel cache -----------===//
#include "kiln/runtime/detail/kernel_cache.hpp"

#include "llvm/Support/SHA256.h"
#include "llvm/ADT/StringExtras.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <unistd.h>

namespace fs = std::filesystem;

namespace kiln {

namespace {
constexpr Stage kStages[] = {Stage::Kiln, Stage::Lowered, Stage::LLVMDialect, Stage::LLVMIR,
                             Stage::Ptx};
std::string fileName(Stage s) { return std::string(to_string(s)) + ".txt"; }
} // namespace

std::string KernelCache::directory() {
  if (const char *dir = std::getenv("KILN_CACHE_DIR"); dir && *dir)
    return dir;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return (fs::path(xdg) / "kiln").string();
  if (const char *home = std::getenv("HOME"); home && *home)
    return (fs::path(home) / ".cache" / "kiln").string();
  return (fs::temp_directory_path() / ("kiln-cache-" + std::to_string(getuid()))).string();
}

bool KernelCache::enabled() {
  const char *v = std::getenv("KILN_CACHE");
  return !(v && std::string_view(v) == "0");
}

std::string KernelCache::key(std::initializer_list<std::string_view> parts) {
  llvm::SHA256 sha;
  for (std::string_view p : parts) {
    std::string len = std::to_string(p.size()) + ":";
    sha.update(len);
    sha.update(llvm::StringRef(p.data(), p.size()));
  }
  auto digest = sha.final();
  return llvm::toHex(digest, /*LowerCase=*/true);
}

namespace {
std::optional<std::string> readFile(const fs::path &file) {
  std::ifstream in(file, std::ios::binary);
  if (!in)
    return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}
constexpr const char *kObjectFile = "host.o";
} // namespace

std::optional<KernelCache::Entry> KernelCache::load(const std::string &key) {
  fs::path entry = fs::path(directory()) / key;
  std::error_code ec;
  if (!fs::is_directory(entry, ec))
    return std::nullopt;
  Entry e;
  for (Stage s : kStages)
    if (auto text = readFile(entry / fileName(s)))
      e.stages[s] = std::move(*text);
  if (auto object = readFile(entry / kObjectFile))
    e.object = std::move(*object);
  if (!e.stages.count(Stage::Ptx) && e.object.empty())
    return std::nullopt;
  return e;
}

void KernelCache::store(const std::string &key, const Entry &entry) {
  std::error_code ec;
  fs::path root = directory();
  fs::create_directories(root, ec);
  if (ec)
    return;
  std::random_device rd;
  fs::path tmp = root / ("tmp-" + key.substr(0, 16) + "-" + std::to_string(getpid()) + "-" +
                         std::to_string(rd()));
  if (!fs::create_directory(tmp, ec) || ec)
    return;
  auto write = [&](const fs::path &file, const std::string &bytes) {
    std::ofstream out(file, std::ios::binary);
    out << bytes;
    return bool(out);
  };
  bool written = true;
  for (auto &[stage, text] : entry.stages)
    written = written && write(tmp / fileName(stage), text);
  if (!entry.object.empty())
    written = written && write(tmp / kObjectFile, entry.object);
  if (!written) {
    fs::remove_all(tmp, ec);
    return;
  }
  // Publishing is one rename; if another process won the race, keep theirs.
  fs::rename(tmp, root / key, ec);
  if (ec)
    fs::remove_all(tmp, ec);
}

void KernelCache::discard(const std::string &key) {
  std::error_code ec;
  fs::remove_all(fs::path(directory()) / key, ec);
}

} // namespace kiln
