//===- fuzz_cache_entry.cpp - libFuzzer: the kernel-cache entry reader ----===//
//
// Input: a flag byte, manifest lines, then files, separated by 0x01 bytes
// (name, contents, name, contents, ...). With the flag's low bit set the
// manifest lines are sealed first (a valid last line appended), so that
// mutations reach the checks past the seal. An entry the reader accepts must
// be exactly what its files say: written again, it reads back the same.
//
//===----------------------------------------------------------------------===//
#include "kiln/runtime/detail/kernel_cache.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {
constexpr std::string_view kKey =
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

std::vector<std::string_view> splitAt(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (std::size_t at; (at = s.find(sep)) != std::string_view::npos; s.remove_prefix(at + 1))
    parts.push_back(s.substr(0, at));
  parts.push_back(s);
  return parts;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  std::string_view in(reinterpret_cast<const char *>(data) + 1, size - 1);
  std::vector<std::string_view> parts = splitAt(in, '\x01');
  std::string manifest(parts[0]);
  if (data[0] & 1)
    manifest = kiln::KernelCache::seal_manifest(manifest);
  std::map<std::string, std::string> files;
  for (std::size_t i = 1; i + 1 < parts.size(); i += 2)
    files[std::string(parts[i])] = std::string(parts[i + 1]);
  auto entry = kiln::KernelCache::parse_entry(kKey, manifest, files);
  if (!entry)
    return 0;
  auto again = kiln::KernelCache::files_of(*entry);
  auto reread = kiln::KernelCache::parse_entry(
      kKey, kiln::KernelCache::make_manifest(kKey, again), again);
  if (!reread || reread->stages != entry->stages || reread->object != entry->object) {
    std::fprintf(stderr, "an accepted entry does not read back the same\n");
    std::abort();
  }
  return 0;
}
