//===- Tokenizer.cpp - GPT-2's byte-level BPE ------------------------------===//
#include "kiln/gpt2/tokenizer.hpp"

#include "Json.h"

#include "kiln/runtime/kernel.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>

namespace kiln::gpt2 {
using json::appendUtf8;
namespace {

struct CodeRange {
  char32_t lo, hi;
};
#include "UnicodeTables.inc"

template <std::size_t N> bool inRanges(const CodeRange (&table)[N], char32_t c) {
  auto it = std::upper_bound(std::begin(table), std::end(table), c,
                             [](char32_t v, const CodeRange &r) { return v < r.lo; });
  return it != std::begin(table) && c <= std::prev(it)->hi;
}

/// One code point of the input and the bytes it came from. Bytes that are
/// not valid UTF-8 become code points of their own (class "other"), so that
/// every input still round-trips.
struct Char {
  char32_t cp;
  std::size_t begin, end;
  bool valid;
};

std::vector<Char> decodeUtf8(std::string_view s) {
  std::vector<Char> out;
  std::size_t i = 0;
  while (i < s.size()) {
    auto b = static_cast<unsigned char>(s[i]);
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    char32_t cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    bool ok = len > 0 && i + len <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      auto c = static_cast<unsigned char>(s[i + k]);
      ok = (c >> 6) == 2;
      cp = (cp << 6) | (c & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are invalid too.
    static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (ok && (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)))
      ok = false;
    if (!ok) {
      out.push_back({0xFFFD, i, i + 1, false});
      ++i;
      continue;
    }
    out.push_back({cp, i, i + std::size_t(len), true});
    i += std::size_t(len);
  }
  return out;
}

bool isLetter(const Char &c) { return c.valid && inRanges(kLetters, c.cp); }
bool isNumber(const Char &c) { return c.valid && inRanges(kNumbers, c.cp); }
bool isSpace(const Char &c) { return c.valid && inRanges(kSpaces, c.cp); }
bool isOther(const Char &c) { return !isLetter(c) && !isNumber(c) && !isSpace(c); }

/// GPT-2 maps each byte to a printable code point: printable Latin-1 bytes
/// to themselves, the rest to U+0100 onwards, in byte order.
std::array<char32_t, 256> byteToCode() {
  std::array<char32_t, 256> map{};
  auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  char32_t next = 256;
  for (int b = 0; b < 256; ++b)
    map[b] = printable(b) ? char32_t(b) : next++;
  return map;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("gpt2 tokenizer: cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A JSON object of token -> id.
std::unordered_map<std::string, int32_t> parseVocab(const std::string &text,
                                                    const std::string &path) {
  json::Value root = json::parse(text, "gpt2 tokenizer: " + path);
  if (root.kind != json::Value::Kind::Object || root.object.empty())
    throw Error("gpt2 tokenizer: " + path + ": expected a JSON object of token -> id");
  std::unordered_map<std::string, int32_t> vocab;
  vocab.reserve(root.object.size());
  for (auto &[token, id] : root.object) {
    if (id.kind != json::Value::Kind::Number || id.number < 0 || id.number > INT32_MAX ||
        id.number != double(int64_t(id.number)))
      throw Error("gpt2 tokenizer: " + path + ": the id of token '" + token +
                  "' is not a non-negative integer");
    vocab[token] = int32_t(id.number);
  }
  return vocab;
}

constexpr std::string_view kEndOfText = "<|endoftext|>";

} // namespace

struct Tokenizer::Impl {
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::string> tokens;                // id -> token string (byte-mapped UTF-8)
  std::unordered_map<std::string, int32_t> ranks; // "a b" -> merge rank
  std::array<char32_t, 256> byteCode = byteToCode();
  std::unordered_map<char32_t, unsigned char> codeByte;
  std::array<std::string, 256> byteSymbol; // byte -> its code point, as UTF-8
  mutable std::mutex cacheMutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;

  std::vector<int32_t> bpe(const std::string &piece) const;
};

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::Tokenizer(Tokenizer &&) noexcept = default;
Tokenizer &Tokenizer::operator=(Tokenizer &&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::string &vocabPath, const std::string &mergesPath) {
  Tokenizer t;
  Impl &m = *t.impl_;
  m.vocab = parseVocab(readFile(vocabPath), vocabPath);
  int32_t maxId = 0;
  for (auto &[tok, id] : m.vocab)
    maxId = std::max(maxId, id);
  m.tokens.assign(std::size_t(maxId) + 1, {});
  for (auto &[tok, id] : m.vocab)
    m.tokens[std::size_t(id)] = tok;
  for (int b = 0; b < 256; ++b) {
    m.codeByte[m.byteCode[b]] = static_cast<unsigned char>(b);
    appendUtf8(m.byteSymbol[b], m.byteCode[b]);
    if (!m.vocab.count(m.byteSymbol[b]))
      throw Error("gpt2 tokenizer: " + vocabPath + " has no token for byte " + std::to_string(b) +
                  " (not a byte-level BPE vocabulary)");
  }
  std::istringstream merges(readFile(mergesPath));
  std::string line;
  int lineNo = 0;
  while (std::getline(merges, line)) {
    ++lineNo;
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.empty() || (lineNo == 1 && line.rfind("#version", 0) == 0))
      continue;
    auto sp = line.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == line.size() ||
        line.find(' ', sp + 1) != std::string::npos)
      throw Error("gpt2 tokenizer: " + mergesPath + ":" + std::to_string(lineNo) +
                  ": expected two tokens separated by one space, got '" + line + "'");
    m.ranks.emplace(line, int32_t(m.ranks.size()));
  }
  if (m.ranks.empty())
    throw Error("gpt2 tokenizer: " + mergesPath + " has no merges");
  auto eot = m.vocab.find(std::string(kEndOfText));
  t.eot_ = eot == m.vocab.end() ? -1 : eot->second;
  return t;
}

Tokenizer Tokenizer::from_dir(const std::string &dir) {
  namespace fs = std::filesystem;
  for (auto [v, mg] :
       {std::pair{"vocab.json", "merges.txt"}, std::pair{"encoder.json", "vocab.bpe"}}) {
    fs::path vp = fs::path(dir) / v, mp = fs::path(dir) / mg;
    if (fs::exists(vp) && fs::exists(mp))
      return load(vp.string(), mp.string());
  }
  throw Error("gpt2 tokenizer: " + dir +
              " has neither vocab.json + merges.txt nor encoder.json + vocab.bpe");
}

int32_t Tokenizer::vocab_size() const { return int32_t(impl_->tokens.size()); }

std::vector<std::string> Tokenizer::split(std::string_view text) {
  std::vector<Char> cs = decodeUtf8(text);
  std::vector<std::string> pieces;
  std::size_t n = cs.size(), i = 0;
  auto emit = [&](std::size_t from, std::size_t to) {
    pieces.emplace_back(text.substr(cs[from].begin, cs[to - 1].end - cs[from].begin));
    i = to;
  };
  auto run = [&](std::size_t j, auto pred) {
    while (j < n && pred(cs[j]))
      ++j;
    return j;
  };
  while (i < n) {
    // 's 't 're 've 'm 'll 'd
    if (cs[i].cp == '\'' && i + 1 < n) {
      char32_t a = cs[i + 1].cp, b = i + 2 < n ? cs[i + 2].cp : 0;
      if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        emit(i, i + 2);
        continue;
      }
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
        emit(i, i + 3);
        continue;
      }
    }
    // An optional space, then letters | numbers | other symbols.
    std::size_t j = cs[i].cp == ' ' && i + 1 < n ? i + 1 : i;
    if (isLetter(cs[j])) {
      emit(i, run(j, isLetter));
      continue;
    }
    if (isNumber(cs[j])) {
      emit(i, run(j, isNumber));
      continue;
    }
    if (isOther(cs[j])) {
      emit(i, run(j, isOther));
      continue;
    }
    // White space: a run, leaving its last character to the next piece
    // when a non-space follows (\s+(?!\S)), else the whole run.
    std::size_t end = run(i, isSpace);
    if (end < n && end - i > 1)
      emit(i, end - 1);
    else
      emit(i, end == i ? i + 1 : end);
  }
  return pieces;
}

std::vector<int32_t> Tokenizer::Impl::bpe(const std::string &piece) const {
  {
    std::lock_guard<std::mutex> lock(cacheMutex);
    auto it = cache.find(piece);
    if (it != cache.end())
      return it->second;
  }
  std::vector<std::string> word;
  for (unsigned char b : piece)
    word.push_back(byteSymbol[b]);
  while (word.size() > 1) {
    int32_t best = INT32_MAX;
    std::size_t at = 0;
    for (std::size_t k = 0; k + 1 < word.size(); ++k) {
      auto r = ranks.find(word[k] + ' ' + word[k + 1]);
      if (r != ranks.end() && r->second < best) {
        best = r->second;
        at = k;
      }
    }
    if (best == INT32_MAX)
      break;
    // Merge every occurrence of the best pair, left to right.
    std::string first = word[at], second = word[at + 1];
    std::vector<std::string> merged;
    for (std::size_t k = 0; k < word.size();) {
      if (k + 1 < word.size() && word[k] == first && word[k + 1] == second) {
        merged.push_back(first + second);
        k += 2;
      } else {
        merged.push_back(word[k++]);
      }
    }
    word = std::move(merged);
  }
  std::vector<int32_t> ids;
  for (const std::string &sym : word) {
    auto it = vocab.find(sym);
    if (it == vocab.end())
      throw Error("gpt2 tokenizer: the vocabulary has no token for a merge result (mismatched "
                  "vocab and merges?)");
    ids.push_back(it->second);
  }
  std::lock_guard<std::mutex> lock(cacheMutex);
  if (cache.size() > 100000)
    cache.clear();
  cache.emplace(piece, ids);
  return ids;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  auto encodeText = [&](std::string_view part) {
    for (const std::string &piece : split(part)) {
      auto p = impl_->bpe(piece);
      ids.insert(ids.end(), p.begin(), p.end());
    }
  };
  // <|endoftext|> in the text is the special token, as in GPT-2's tokenizers.
  std::size_t pos = 0;
  while (eot_ >= 0) {
    std::size_t at = text.find(kEndOfText, pos);
    if (at == std::string_view::npos)
      break;
    encodeText(text.substr(pos, at - pos));
    ids.push_back(eot_);
    pos = at + kEndOfText.size();
  }
  encodeText(text.substr(pos));
  return ids;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || std::size_t(id) >= impl_->tokens.size() || impl_->tokens[std::size_t(id)].empty())
    throw Error("gpt2 tokenizer: token id " + std::to_string(id) +
                " is not in the vocabulary (size " + std::to_string(vocab_size()) + ")");
  if (id == eot_)
    return std::string(kEndOfText);
  std::string out;
  for (const Char &c : decodeUtf8(impl_->tokens[std::size_t(id)])) {
    auto b = impl_->codeByte.find(c.cp);
    if (b == impl_->codeByte.end())
      throw Error("gpt2 tokenizer: token " + std::to_string(id) +
                  " holds a character outside the byte map");
    out += char(b->second);
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t> &ids) const {
  std::string out;
  for (int32_t id : ids)
    out += token_bytes(id);
  return out;
}

} // namespace kiln::gpt2
