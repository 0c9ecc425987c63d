//===- KernelCache.cpp - content-addressed on-disk kernel cache -----------===//
#include "kiln/runtime/detail/kernel_cache.hpp"

#include "llvm/Support/SHA256.h"
#include "llvm/ADT/StringExtras.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <filesystem>
#include <random>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace kiln {

namespace {
constexpr Stage kStages[] = {Stage::Kiln, Stage::Lowered, Stage::LLVMDialect, Stage::LLVMIR,
                             Stage::Ptx};
constexpr std::string_view kObjectFile = "host.o";
std::string fileName(Stage s) { return std::string(to_string(s)) + ".txt"; }

/// The stage stored in file `name`, if it names one.
std::optional<Stage> stageOf(std::string_view name) {
  for (Stage s : kStages)
    if (name == fileName(s))
      return s;
  return std::nullopt;
}

/// Keys and digests alike are 64 lowercase hex digits; checking keys also
/// keeps a key from naming a path outside the cache folder.
bool isDigest(std::string_view s) {
  if (s.size() != 64)
    return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  return true;
}

std::string sha256(std::string_view bytes) {
  return llvm::toHex(llvm::SHA256::hash(llvm::ArrayRef<uint8_t>(
                         reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size())),
                     /*LowerCase=*/true);
}

/// A size as the manifest writes it: decimal digits, no sign, no leading zero.
std::optional<std::uint64_t> parseSize(std::string_view s) {
  if (s.empty() || s.size() > 20 || (s.size() > 1 && s[0] == '0'))
    return std::nullopt;
  for (char c : s)
    if (c < '0' || c > '9')
      return std::nullopt;
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size())
    return std::nullopt;
  return v;
}

/// Splits `line` into its `n` fields, separated by single spaces, none empty.
bool splitFields(std::string_view line, std::string_view *fields, std::size_t n) {
  for (std::size_t i = 0; i + 1 < n; ++i) {
    std::size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0)
      return false;
    fields[i] = line.substr(0, space);
    line.remove_prefix(space + 1);
  }
  fields[n - 1] = line;
  return !line.empty() && line.find(' ') == std::string_view::npos;
}

/// Closes a file descriptor on every path out.
struct Fd {
  int fd;
  explicit Fd(int fd) : fd(fd) {}
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
  explicit operator bool() const { return fd >= 0; }
};

/// The bytes of `name` in folder `dir` if it is a regular file of at most
/// `maxBytes`. The type is checked before opening, so that a FIFO or a
/// device is never opened, and the open neither follows a symlink nor
/// blocks, should the file be replaced in between.
std::optional<std::string> readRegular(int dir, const std::string &name, std::uint64_t maxBytes) {
  struct stat st;
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
      std::uint64_t(st.st_size) > maxBytes)
    return std::nullopt;
  Fd fd(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd || ::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      std::uint64_t(st.st_size) > maxBytes)
    return std::nullopt;
  std::string bytes(std::size_t(st.st_size), '\0');
  std::size_t done = 0;
  // One byte past the size: a file that grew since fstat is not this entry's.
  char extra;
  while (true) {
    char *at = done < bytes.size() ? bytes.data() + done : &extra;
    std::size_t want = done < bytes.size() ? bytes.size() - done : 1;
    ssize_t n = ::read(fd.fd, at, want);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return std::nullopt;
    if (n == 0)
      break;
    if (done >= bytes.size())
      return std::nullopt;
    done += std::size_t(n);
  }
  if (done != bytes.size())
    return std::nullopt;
  return bytes;
}

/// The names in folder `dir`, without "." and "..".
std::optional<std::vector<std::string>> listFolder(int dir) {
  int copy = ::dup(dir);
  if (copy < 0)
    return std::nullopt;
  DIR *d = ::fdopendir(copy);
  if (!d) {
    ::close(copy);
    return std::nullopt;
  }
  ::rewinddir(d);
  std::vector<std::string> names;
  while (dirent *e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name != "." && name != "..")
      names.emplace_back(name);
  }
  ::closedir(d);
  return names;
}

/// Creates `file` (which must not exist) holding `bytes`.
bool writeNew(const fs::path &file, std::string_view bytes) {
  Fd fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd)
    return false;
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd.fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += std::size_t(n);
  }
  int rc = ::close(fd.fd);
  fd.fd = -1;
  return rc == 0;
}

/// A name in the cache folder no other process or thread picks. Every
/// temporary name starts with "tmp-", which no key does.
fs::path uniqueName(const fs::path &root, std::string_view what, const std::string &key) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return root / ("tmp-" + std::string(what) + key.substr(0, 16) + "-" + std::to_string(getpid()) +
                 "-" + std::to_string(rng()));
}
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

std::map<std::string, std::string> KernelCache::files_of(const Entry &entry) {
  std::map<std::string, std::string> files;
  for (auto &[stage, text] : entry.stages)
    files[fileName(stage)] = text;
  if (!entry.object.empty())
    files[std::string(kObjectFile)] = entry.object;
  return files;
}

std::string KernelCache::make_manifest(std::string_view key,
                                       const std::map<std::string, std::string> &files) {
  std::string m = std::string(kManifestFormat) + "\nkey " + std::string(key) + "\n";
  for (auto &[name, bytes] : files)
    m += "file " + name + " " + std::to_string(bytes.size()) + " " + sha256(bytes) + "\n";
  return seal_manifest(m);
}

std::string KernelCache::seal_manifest(std::string_view lines) {
  return std::string(lines) + "end " + sha256(lines) + "\n";
}

std::optional<std::map<std::string, KernelCache::ManifestFile>>
KernelCache::parse_manifest(std::string_view key, std::string_view manifest) {
  if (!isDigest(key) || manifest.size() > kMaxManifestBytes || manifest.empty() ||
      manifest.back() != '\n')
    return std::nullopt;
  // The last line seals every byte above it, so any change is caught here,
  // before the fields are read.
  std::string_view body = manifest.substr(0, manifest.size() - 1);
  std::size_t endLine = body.rfind('\n');
  if (endLine == std::string_view::npos)
    return std::nullopt;
  std::string_view sealed = manifest.substr(0, endLine + 1);
  std::string_view seal = body.substr(endLine + 1);
  if (seal.size() != 4 + 64 || seal.substr(0, 4) != "end " || !isDigest(seal.substr(4)) ||
      seal.substr(4) != sha256(sealed))
    return std::nullopt;

  std::map<std::string, ManifestFile> files;
  std::size_t lineNo = 0;
  std::string_view previous;
  while (!sealed.empty()) {
    std::size_t nl = sealed.find('\n');
    std::string_view line = sealed.substr(0, nl);
    sealed.remove_prefix(nl + 1);
    switch (lineNo++) {
    case 0:
      if (line != kManifestFormat)
        return std::nullopt;
      continue;
    case 1:
      // An entry copied under another key is not that key's entry.
      if (line.substr(0, 4) != "key " || line.substr(4) != key)
        return std::nullopt;
      continue;
    default:
      break;
    }
    std::string_view f[4];
    if (!splitFields(line, f, 4) || f[0] != "file")
      return std::nullopt;
    // Names in increasing order make the manifest of a set of files unique
    // and rule out duplicates.
    if (!(stageOf(f[1]) || f[1] == kObjectFile) || (!previous.empty() && f[1] <= previous))
      return std::nullopt;
    auto size = parseSize(f[2]);
    if (!size || *size > kMaxFileBytes || !isDigest(f[3]))
      return std::nullopt;
    previous = f[1];
    files[std::string(f[1])] = {*size, std::string(f[3])};
  }
  if (lineNo < 2)
    return std::nullopt;
  return files;
}

std::optional<KernelCache::Entry>
KernelCache::parse_entry(std::string_view key, std::string_view manifest,
                         std::map<std::string, std::string> files) {
  auto listed = parse_manifest(key, manifest);
  if (!listed || listed->size() != files.size())
    return std::nullopt;
  Entry e;
  for (auto &[name, want] : *listed) {
    auto it = files.find(name);
    if (it == files.end() || it->second.size() != want.size || sha256(it->second) != want.sha256)
      return std::nullopt;
    if (auto stage = stageOf(name))
      e.stages[*stage] = std::move(it->second);
    else if (it->second.empty()) // never written: files_of leaves out an empty object
      return std::nullopt;
    else
      e.object = std::move(it->second);
  }
  if (!e.stages.count(Stage::Ptx) && e.object.empty())
    return std::nullopt;
  return e;
}

std::optional<KernelCache::Entry> KernelCache::load(const std::string &key) {
  if (!isDigest(key))
    return std::nullopt;
  fs::path entry = fs::path(directory()) / key;
  // The entry's folder itself is not followed through a symlink either.
  Fd dir(::open(entry.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!dir)
    return std::nullopt;
  auto manifest = readRegular(dir.fd, std::string(kManifestName), kMaxManifestBytes);
  if (!manifest)
    return std::nullopt;
  auto listed = parse_manifest(key, *manifest);
  if (!listed)
    return std::nullopt;
  // Exactly the listed files and the manifest: nothing extra.
  auto names = listFolder(dir.fd);
  if (!names || names->size() != listed->size() + 1)
    return std::nullopt;
  for (const std::string &name : *names)
    if (name != kManifestName && !listed->count(name))
      return std::nullopt;
  std::map<std::string, std::string> files;
  for (auto &[name, want] : *listed) {
    // Never more than the manifest promises, so a huge file costs nothing.
    auto bytes = readRegular(dir.fd, name, want.size);
    if (!bytes)
      return std::nullopt;
    files.emplace(name, std::move(*bytes));
  }
  return parse_entry(key, *manifest, std::move(files));
}

void KernelCache::store(const std::string &key, const Entry &entry) {
  if (!isDigest(key))
    return;
  auto files = files_of(entry);
  // An entry that would never load is not worth writing.
  for (auto &[name, bytes] : files)
    if (bytes.size() > kMaxFileBytes)
      return;
  std::string manifest = make_manifest(key, files);
  if (manifest.size() > kMaxManifestBytes)
    return;
  std::error_code ec;
  fs::path root = directory();
  fs::create_directories(root, ec);
  if (ec)
    return;
  fs::path tmp = uniqueName(root, "", key);
  if (!fs::create_directory(tmp, ec) || ec)
    return;
  bool written = true;
  for (auto &[name, bytes] : files)
    written = written && writeNew(tmp / name, bytes);
  // The manifest comes last: a folder without one is never an entry.
  written = written && writeNew(tmp / kManifestName, manifest);
  if (!written) {
    fs::remove_all(tmp, ec);
    return;
  }

  // Publishing is one rename. It fails when something is already there:
  // another process's intact entry (a race won) is kept; anything else is a
  // damaged entry, which ours replaces. The exchange swaps the two folders
  // in one step, so a reader sees the damaged entry or ours, never neither
  // and never a mix; the damaged one then lies at `tmp` and is removed.
  fs::path target = root / key;
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (::rename(tmp.c_str(), target.c_str()) == 0)
      return;
    if (errno != EEXIST && errno != ENOTEMPTY && errno != ENOTDIR && errno != EISDIR)
      break;
    if (load(key))
      break;
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0)
      break;
    if (errno == ENOENT) // gone meanwhile: a plain rename again
      continue;
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
      break;
    // A file system without exchange: the damaged entry is moved aside
    // first, leaving a moment in which readers miss.
    fs::path trash = uniqueName(root, "old-", key);
    if (::rename(target.c_str(), trash.c_str()) != 0 && errno != ENOENT)
      break;
    fs::remove_all(trash, ec);
  }
  fs::remove_all(tmp, ec);
}

void KernelCache::discard(const std::string &key) {
  if (!isDigest(key))
    return;
  // Moved aside first, so that a store racing with the removal finds either
  // the old entry or none, never a half-removed one.
  std::error_code ec;
  fs::path root = directory();
  fs::path trash = uniqueName(root, "old-", key);
  if (::rename((fs::path(root) / key).c_str(), trash.c_str()) == 0)
    fs::remove_all(trash, ec);
}

} // namespace kiln
