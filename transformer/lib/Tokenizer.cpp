//===- Tokenizer.cpp - GPT-2's byte-level BPE ------------------------------===//
#include "kiln/gpt2/tokenizer.hpp"

#include "File.h"
#include "Json.h"

#include "kiln/core/error.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>
#include <unordered_map>

namespace kiln::gpt2 {
namespace {

/// Appends code point `c` to `out` as UTF-8.
void appendUtf8(std::string &out, char32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}


struct CodeRange {
  char32_t lo, hi;
};
#include "UnicodeTables.inc"

template <std::size_t N> bool inRanges(const CodeRange (&table)[N], char32_t c) {
  auto it = std::upper_bound(std::begin(table), std::end(table), c,
                             [](char32_t v, const CodeRange &r) { return v < r.lo; });
  return it != std::begin(table) && c <= std::prev(it)->hi;
}

/// One code point of the input and its length in bytes. Bytes that are not
/// valid UTF-8 become code points of their own (class "other"), so that
/// every input still round-trips.
struct Char {
  char32_t cp;
  std::size_t len;
  bool valid;
};

/// The code point that starts at byte `i` of `s` (i < s.size()).
Char decodeAt(std::string_view s, std::size_t i) {
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
  if (!ok)
    return {0xFFFD, 1, false};
  return {cp, std::size_t(len), true};
}

/// The classes GPT-2's pattern tells apart: \p{L}, \p{N}, \s and the rest.
enum class CharClass : unsigned char { Letter, Number, Space, Other };

CharClass classOfCode(char32_t cp) {
  if (inRanges(kLetters, cp))
    return CharClass::Letter;
  if (inRanges(kNumbers, cp))
    return CharClass::Number;
  return inRanges(kSpaces, cp) ? CharClass::Space : CharClass::Other;
}

CharClass classOf(const Char &c) {
  // Most text is ASCII: skip the binary searches for it.
  static const auto ascii = [] {
    std::array<CharClass, 128> t{};
    for (char32_t cp = 0; cp < 128; ++cp)
      t[cp] = classOfCode(cp);
    return t;
  }();
  if (!c.valid)
    return CharClass::Other;
  return c.cp < 128 ? ascii[c.cp] : classOfCode(c.cp);
}

/// Calls `piece(begin, end)` with the byte range of every piece of GPT-2's
/// pre-tokenisation of `s`, in order, until it returns false. Works on the
/// bytes as it goes (no copy, no decoded array), so a caller can stop early
/// on a huge text.
template <class Fn> void forEachPiece(std::string_view s, Fn &&piece) {
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    // 's 't 're 've 'm 'll 'd: ASCII bytes, never part of a longer UTF-8
    // sequence, so comparing bytes is exact; case-sensitive, as HF's.
    if (s[i] == '\'' && i + 1 < n) {
      char a = s[i + 1], b = i + 2 < n ? s[i + 2] : '\0';
      std::size_t len = 0;
      if (a == 's' || a == 't' || a == 'm' || a == 'd')
        len = 2;
      else if (((a == 'r' || a == 'v') && b == 'e') || (a == 'l' && b == 'l'))
        len = 3;
      if (len) {
        if (!piece(i, i + len))
          return;
        i += len;
        continue;
      }
    }
    // An optional U+0020, then a run of letters | numbers | other symbols.
    std::size_t j = s[i] == ' ' && i + 1 < n ? i + 1 : i;
    Char c = decodeAt(s, j);
    CharClass cls = classOf(c);
    if (cls != CharClass::Space) {
      std::size_t end = j + c.len;
      while (end < n) {
        Char d = decodeAt(s, end);
        if (classOf(d) != cls)
          break;
        end += d.len;
      }
      if (!piece(i, end))
        return;
      i = end;
      continue;
    }
    // White space from i (s[i] is white space here): the whole run when it
    // ends the text, else all but its last character (\s+(?!\S)), which
    // starts the next piece; a run of one is a piece (\s+).
    std::size_t end = i, last = i, count = 0;
    while (end < n) {
      Char d = decodeAt(s, end);
      if (classOf(d) != CharClass::Space)
        break;
      last = end;
      end += d.len;
      ++count;
    }
    if (end < n && count > 1)
      end = last;
    else if (count == 0) // only if U+0020 were not white space
      end = i + 1;
    if (!piece(i, end))
      return;
    i = end;
  }
}

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
  // A GPT-2 vocabulary is about 1 MB and its merges 0.5 MB.
  return readRegularFile(path, "tokenizer file", 256 << 20);
}

/// A JSON object of token -> id.
std::unordered_map<std::string, int32_t> parseVocab(const std::string &text,
                                                    const std::string &path) {
  json::Value root = json::parse(text, "gpt2 tokenizer: " + path);
  if (!root.is_object() || root.empty())
    throw Error("gpt2 tokenizer: " + path + ": expected a JSON object of token -> id");
  // Ids index a table of tokens: keep them within a few times the entries.
  const int64_t maxId = std::max<int64_t>(1 << 20, 4 * int64_t(root.size()));
  std::unordered_map<std::string, int32_t> vocab;
  vocab.reserve(root.size());
  for (auto &[token, id] : root.items())
    vocab[token] = int32_t(json::integer(
        id, "gpt2 tokenizer: " + path + ": the id of token '" + token + "'", 0, maxId));
  return vocab;
}

constexpr std::string_view kEndOfText = "<|endoftext|>";

} // namespace

struct Tokenizer::Impl {
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::string> tokens; // id -> token string (byte-mapped UTF-8)
  std::array<char32_t, 256> byteCode = byteToCode();
  std::unordered_map<char32_t, unsigned char> codeByte;
  std::array<std::string, 256> byteSymbol; // byte -> its code point, as UTF-8

  // BPE runs on symbols: every distinct string the vocabulary or a merge
  // names has a number, so that a merge is looked up by a pair of numbers
  // and yields a number. A merge result need not be in the vocabulary (it
  // only has to be once no merge applies), hence symbols apart from ids.
  struct Merge {
    int32_t rank;   // the merge's line among the distinct merges
    int32_t merged; // the symbol it makes
  };
  std::unordered_map<uint64_t, Merge> merges; // (left, right) symbols -> merge
  std::array<int32_t, 256> byteSym{};         // byte -> its symbol
  std::vector<int32_t> symToken;              // symbol -> token id, or -1
  /// Bytes of the longest token: a text of B bytes needs at least
  /// B / maxTokenBytes tokens.
  std::size_t maxTokenBytes = 1;

  static uint64_t pairKey(int32_t left, int32_t right) {
    return uint64_t(uint32_t(left)) << 32 | uint32_t(right);
  }

  // Pieces recur (words, indentation): their tokens are cached. Only short
  // ones, and only so many, so the cache stays small whatever the input.
  static constexpr std::size_t kMaxCachedBytes = 256, kMaxCachedPieces = 1 << 16;
  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  mutable std::mutex cacheMutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache;

  /// Appends the tokens of one piece of the pre-tokenisation to `out`.
  void bpe(std::string_view piece, std::vector<int32_t> &out) const;
  /// The merges applied to `piece`, without the cache.
  std::vector<int32_t> merge(std::string_view piece) const;
  /// Appends the tokens of `text` to `ids`; false (and `ids` incomplete) as
  /// soon as they are known to be more than `maxTokens`.
  bool encode(std::string_view text, std::size_t maxTokens, int32_t eot,
              std::vector<int32_t> &ids) const;
};

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::Tokenizer(Tokenizer &&) noexcept = default;
Tokenizer &Tokenizer::operator=(Tokenizer &&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::string &vocabPath, const std::string &mergesPath) {
  return from_text(readFile(vocabPath), readFile(mergesPath), vocabPath, mergesPath);
}

Tokenizer Tokenizer::from_text(const std::string &vocabJson, const std::string &mergesText,
                               const std::string &vocabPath, const std::string &mergesPath) {
  Tokenizer t;
  Impl &m = *t.impl_;
  m.vocab = parseVocab(vocabJson, vocabPath);
  int32_t maxId = 0;
  for (auto &[tok, id] : m.vocab)
    maxId = std::max(maxId, id);
  m.tokens.assign(std::size_t(maxId) + 1, {});
  for (auto &[tok, id] : m.vocab) {
    if (!m.tokens[std::size_t(id)].empty())
      throw Error("gpt2 tokenizer: " + vocabPath + ": tokens '" + m.tokens[std::size_t(id)] +
                  "' and '" + tok + "' have the same id " + std::to_string(id));
    m.tokens[std::size_t(id)] = tok;
  }
  for (int b = 0; b < 256; ++b) {
    m.codeByte[m.byteCode[b]] = static_cast<unsigned char>(b);
    appendUtf8(m.byteSymbol[b], m.byteCode[b]);
    if (!m.vocab.count(m.byteSymbol[b]))
      throw Error("gpt2 tokenizer: " + vocabPath + " has no token for byte " + std::to_string(b) +
                  " (not a byte-level BPE vocabulary)");
  }
  for (const std::string &tok : m.tokens) {
    std::size_t bytes = 0; // one code point per byte
    for (std::size_t i = 0; i < tok.size(); i += decodeAt(tok, i).len)
      ++bytes;
    m.maxTokenBytes = std::max(m.maxTokenBytes, bytes);
  }
  // Symbols: the vocabulary's strings, then the merges' strings it lacks.
  std::unordered_map<std::string_view, int32_t> symbols;
  std::deque<std::string> extraSymbols; // strings of symbols outside the vocabulary
  symbols.reserve(m.vocab.size());
  m.symToken.reserve(m.vocab.size());
  for (auto &[tok, id] : m.vocab) {
    symbols.emplace(tok, int32_t(m.symToken.size()));
    m.symToken.push_back(id);
  }
  auto symbol = [&](std::string s) {
    if (auto it = symbols.find(s); it != symbols.end())
      return it->second;
    symbols.emplace(extraSymbols.emplace_back(std::move(s)), int32_t(m.symToken.size()));
    m.symToken.push_back(-1);
    return int32_t(m.symToken.size() - 1);
  };
  for (int b = 0; b < 256; ++b)
    m.byteSym[b] = symbols.at(m.byteSymbol[b]);
  std::istringstream merges(mergesText);
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
    std::string first = line.substr(0, sp), second = line.substr(sp + 1);
    int32_t left = symbol(first), right = symbol(second), merged = symbol(first + second);
    // A repeated pair keeps its first rank.
    m.merges.try_emplace(Impl::pairKey(left, right), Impl::Merge{int32_t(m.merges.size()), merged});
  }
  if (m.merges.empty())
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
    std::error_code ec; // unreadable or looping paths: not there, and load() says why
    if (fs::exists(vp, ec) && fs::exists(mp, ec))
      return load(vp.string(), mp.string());
  }
  throw Error("gpt2 tokenizer: " + dir +
              " has neither vocab.json + merges.txt nor encoder.json + vocab.bpe");
}

int32_t Tokenizer::vocab_size() const { return int32_t(impl_->tokens.size()); }

std::vector<std::string> Tokenizer::split(std::string_view text) {
  std::vector<std::string> pieces;
  forEachPiece(text, [&](std::size_t begin, std::size_t end) {
    pieces.emplace_back(text.substr(begin, end - begin));
    return true;
  });
  return pieces;
}

// GPT-2's reference BPE repeatedly finds the adjacent pair of lowest rank and
// merges all its occurrences in one left-to-right sweep, which is quadratic
// in the length of a piece. This gives the same tokens in O(n log n): the
// symbols form a linked list over the piece's bytes (a symbol is named by
// its first byte), and a heap holds a candidate for every adjacent pair that
// has a merge, ordered by (rank, position). Candidates of one rank are one
// pair, so popping them in position order is the reference's sweep; merges
// invalidate candidates, which are dropped when popped.
//
// A merge can only make pairs of other ranks. Their rank can be lower than
// the sweep's only if a merge that makes a symbol ranks after one that uses
// it (never so in GPT-2's files); the reference still finishes the sweep
// first, so such pairs wait until it is done. (HF's tokenizers would merge
// them at once, and differ from the reference in that case.)
std::vector<int32_t> Tokenizer::Impl::merge(std::string_view piece) const {
  struct Symbol {
    int32_t sym; // -1 once merged into the symbol on its left
    int32_t prev, next;
  };
  struct Candidate {
    int32_t rank, left, right;
    int32_t rightSym; // what `right` was: it may have merged since
    int32_t merged;
  };
  auto later = [](const Candidate &a, const Candidate &b) {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  };
  if (piece.size() > std::size_t(INT32_MAX))
    throw Error("gpt2 tokenizer: a piece of " + std::to_string(piece.size()) +
                " bytes is longer than the tokenizer handles");
  const auto n = int32_t(piece.size());
  std::vector<Symbol> syms(static_cast<std::size_t>(n));
  for (int32_t i = 0; i < n; ++i)
    syms[std::size_t(i)] = {byteSym[static_cast<unsigned char>(piece[std::size_t(i)])], i - 1,
                            i + 1 < n ? i + 1 : -1};
  std::vector<Candidate> heap, waiting;
  int32_t sweep = INT32_MIN; // the rank being merged
  auto consider = [&](int32_t left) {
    int32_t right = syms[std::size_t(left)].next;
    if (right < 0)
      return;
    int32_t rightSym = syms[std::size_t(right)].sym;
    auto it = merges.find(pairKey(syms[std::size_t(left)].sym, rightSym));
    if (it == merges.end())
      return;
    Candidate c{it->second.rank, left, right, rightSym, it->second.merged};
    if (c.rank < sweep) {
      waiting.push_back(c);
    } else {
      heap.push_back(c);
      std::push_heap(heap.begin(), heap.end(), later);
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i)
    consider(i);
  while (true) {
    if (heap.empty() || heap.front().rank != sweep) {
      // The sweep over the occurrences of one pair is over.
      for (const Candidate &c : waiting) {
        heap.push_back(c);
        std::push_heap(heap.begin(), heap.end(), later);
      }
      waiting.clear();
      if (heap.empty())
        break;
      sweep = heap.front().rank;
    }
    std::pop_heap(heap.begin(), heap.end(), later);
    Candidate c = heap.back();
    heap.pop_back();
    Symbol &l = syms[std::size_t(c.left)], &r = syms[std::size_t(c.right)];
    // A symbol changes only by taking its right neighbour, which changes its
    // `next`: so `left` is as it was iff its `next` is still `right`.
    if (l.sym < 0 || l.next != c.right || r.sym != c.rightSym)
      continue;
    l.sym = c.merged;
    l.next = r.next;
    if (r.next >= 0)
      syms[std::size_t(r.next)].prev = c.left;
    r.sym = -1;
    if (l.prev >= 0)
      consider(l.prev);
    consider(c.left);
  }
  std::vector<int32_t> ids;
  for (int32_t i = 0; i >= 0 && i < n; i = syms[std::size_t(i)].next) {
    int32_t id = symToken[std::size_t(syms[std::size_t(i)].sym)];
    if (id < 0)
      throw Error("gpt2 tokenizer: the vocabulary has no token for a merge result (mismatched "
                  "vocab and merges?)");
    ids.push_back(id);
  }
  return ids;
}

void Tokenizer::Impl::bpe(std::string_view piece, std::vector<int32_t> &out) const {
  if (piece.size() == 1) {
    out.push_back(symToken[std::size_t(byteSym[static_cast<unsigned char>(piece[0])])]);
    return;
  }
  bool cacheable = piece.size() <= kMaxCachedBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cacheMutex);
    auto it = cache.find(piece);
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids = merge(piece);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cacheMutex);
    if (cache.size() >= kMaxCachedPieces)
      cache.clear();
    cache.emplace(piece, std::move(ids));
  }
}

bool Tokenizer::Impl::encode(std::string_view text, std::size_t maxTokens, int32_t eot,
                             std::vector<int32_t> &ids) const {
  // At least this many tokens cover `bytes` bytes.
  auto fewest = [&](std::size_t bytes) {
    return bytes / maxTokenBytes + (bytes % maxTokenBytes != 0);
  };
  if (fewest(text.size()) > maxTokens)
    return false;
  auto encodeText = [&](std::string_view part) {
    bool fits = true;
    forEachPiece(part, [&](std::size_t begin, std::size_t end) {
      if (fewest(end - begin) > maxTokens - ids.size()) {
        fits = false;
        return false;
      }
      bpe(part.substr(begin, end - begin), ids);
      fits = ids.size() <= maxTokens;
      return fits;
    });
    return fits;
  };
  // <|endoftext|> in the text is the special token, as in GPT-2's tokenizers.
  std::size_t pos = 0;
  while (eot >= 0) {
    std::size_t at = text.find(kEndOfText, pos);
    if (at == std::string_view::npos)
      break;
    if (!encodeText(text.substr(pos, at - pos)) || ids.size() == maxTokens)
      return false;
    ids.push_back(eot);
    pos = at + kEndOfText.size();
  }
  return encodeText(text.substr(pos));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  impl_->encode(text, SIZE_MAX, eot_, ids);
  return ids;
}

std::optional<std::vector<int32_t>> Tokenizer::encode(std::string_view text,
                                                      std::size_t max_tokens) const {
  std::vector<int32_t> ids;
  if (!impl_->encode(text, max_tokens, eot_, ids))
    return std::nullopt;
  return ids;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || std::size_t(id) >= impl_->tokens.size() || impl_->tokens[std::size_t(id)].empty())
    throw Error("gpt2 tokenizer: token id " + std::to_string(id) +
                " is not in the vocabulary (size " + std::to_string(vocab_size()) + ")");
  if (id == eot_)
    return std::string(kEndOfText);
  const std::string &token = impl_->tokens[std::size_t(id)];
  std::string out;
  for (std::size_t i = 0; i < token.size();) {
    Char c = decodeAt(token, i);
    i += c.len;
    auto b = c.valid ? impl_->codeByte.find(c.cp) : impl_->codeByte.end();
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
