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

std::optional<std::map<Stage, std::string>> KernelCache::load(const std::string &key) {
  fs::path entry = fs::path(directory()) / key;
  std::error_code ec;
  if (!fs::is_directory(entry, ec))
    return std::nullopt;
  std::map<Stage, std::string> stages;
  for (Stage s : kStages) {
    std::ifstream in(entry / fileName(s), std::ios::binary);
    if (!in)
      continue;
    std::ostringstream text;
    text << in.rdbuf();
    stages[s] = text.str();
  }
  if (!stages.count(Stage::Ptx))
    return std::nullopt;
  return stages;
}

void KernelCache::store(const std::string &key, const std::map<Stage, std::string> &stages) {
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
  for (auto &[stage, text] : stages) {
    std::ofstream out(tmp / fileName(stage), std::ios::binary);
    out << text;
    if (!out) {
      fs::remove_all(tmp, ec);
      return;
    }
  }
  // Publishing is one rename; if another process won the race, keep theirs.
  fs::rename(tmp, root / key, ec);
  if (ec)
    fs::remove_all(tmp, ec);
}

} // namespace kiln
