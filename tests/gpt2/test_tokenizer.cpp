//===- test_tokenizer.cpp - GPT-2's BPE against HF's ids -------------------===//
#include <doctest/doctest.h>

#include "support/temp_dir.hpp"
#include "bpe_reference.hpp"
#include "kiln/gpt2/tokenizer.hpp"
#include "kiln/core/error.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

using namespace kiln;
using gpt2::Tokenizer;

namespace {
/// $KILN_GPT2_VOCAB and $KILN_GPT2_TEST_DATA override the build-time paths.
std::string vocabDir() {
  const char *env = std::getenv("KILN_GPT2_VOCAB");
  return env ? env : KILN_GPT2_VOCAB_DIR;
}
std::string testData() {
  const char *env = std::getenv("KILN_GPT2_TEST_DATA");
  return env ? env : KILN_GPT2_TEST_DATA;
}
const Tokenizer &tok() {
  static Tokenizer t = Tokenizer::from_dir(vocabDir());
  return t;
}
std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
} // namespace

TEST_CASE("pre-tokenisation follows GPT-2's pattern") {
  using V = std::vector<std::string>;
  CHECK(Tokenizer::split("Hello world") == V{"Hello", " world"});
  CHECK(Tokenizer::split("don't we'll I'm") == V{"don", "'t", " we", "'ll", " I", "'m"});
  CHECK(Tokenizer::split("a   b") == V{"a", "  ", " b"});
  CHECK(Tokenizer::split("x\n\ny") == V{"x", "\n", "\n", "y"});
  CHECK(Tokenizer::split("end  ") == V{"end", "  "});
  CHECK(Tokenizer::split("f(x)=42;") == V{"f", "(", "x", ")=", "42", ";"});
  CHECK(Tokenizer::split(" 'quoted'") == V{" '", "quoted", "'"});
  CHECK(Tokenizer::split("naïve café 日本") == V{"naïve", " café", " 日本"});
  CHECK(Tokenizer::split("3.14") == V{"3", ".", "14"});
  CHECK(Tokenizer::split("").empty());
}

TEST_CASE("the real GPT-2 vocabulary encodes as HF does") {
  CHECK(tok().vocab_size() == 50257);
  CHECK(tok().eot() == 50256);
  CHECK(tok().encode("Hello world") == std::vector<int32_t>{15496, 995});
  CHECK(tok().encode("<|endoftext|>") == std::vector<int32_t>{50256});
  // ids from transformers' GPT2Tokenizer on the same files (make_golden.py tokenizer).
  auto cases = nlohmann::json::parse(slurp(testData() + "/tokenizer_golden.json"));
  REQUIRE(cases.size() >= 10);
  for (const auto &c : cases) {
    auto text = c.at("text").get<std::string>();
    auto want = c.at("ids").get<std::vector<int32_t>>();
    CAPTURE(text);
    CHECK(tok().encode(text) == want);
    CHECK(tok().decode(want) == text);
  }
}

TEST_CASE("encode then decode gives back any bytes") {
  const char *texts[] = {"plain ascii",
                         "Straße ẞ ǅ",
                         "🙂 emoji 👍🏽",
                         "mixed\t\r\n\v\f whitespace",
                         "\xff\xfe invalid \xc3 utf-8 \xe2\x82",
                         "\xed\xa0\x80 surrogate",
                         "\0 nul"};
  for (const char *t : texts) {
    std::string s(t);
    CAPTURE(s);
    CHECK(tok().decode(tok().encode(s)) == s);
  }
  std::string all;
  for (int b = 1; b < 256; ++b)
    all += char(b);
  CHECK(tok().decode(tok().encode(all)) == all);
}

TEST_CASE("bad tokenizer files are reported with what is wrong") {
  test::TempDir dir("kiln-tokenizer-test");
  auto write = [&](const std::string &name, const std::string &text) {
    std::ofstream(dir.path + "/" + name) << text;
    return dir.path + "/" + name;
  };
  CHECK_THROWS_WITH_AS(Tokenizer::load(dir.path + "/none.json", dir.path + "/none.bpe"),
                       doctest::Contains("cannot open"), Error);
  CHECK_THROWS_WITH_AS(Tokenizer::load(write("bad.json", "{\"a\": 1,"), write("m.txt", "a b\n")),
                       doctest::Contains("bad.json"), Error);
  CHECK_THROWS_WITH_AS(Tokenizer::load(write("small.json", "{\"a\": 0}"), write("m2.txt", "a b\n")),
                       doctest::Contains("has no token for byte"), Error);
  CHECK_THROWS_WITH_AS(
      Tokenizer::load(vocabDir() + "/encoder.json", write("bad.bpe", "#version: 0.2\na b c\n")),
      doctest::Contains("bad.bpe:2: expected two tokens"), Error);
  CHECK_THROWS_WITH_AS(Tokenizer::from_dir(dir.path), doctest::Contains("has neither vocab.json"),
                       Error);
  CHECK_THROWS_WITH_AS(tok().decode({60000}), doctest::Contains("not in the vocabulary"), Error);
}

namespace {
/// The tokens of `ids`, each as the bytes it stands for.
std::vector<std::string> tokenBytes(const Tokenizer &t, const std::vector<int32_t> &ids) {
  std::vector<std::string> out;
  for (int32_t id : ids)
    out.push_back(t.token_bytes(id));
  return out;
}
/// GPT-2's reference merging of every piece of `text`.
std::vector<std::string> referenceTokens(const test::ReferenceBpe &ref, std::string_view text) {
  std::vector<std::string> out;
  for (const std::string &piece : Tokenizer::split(text))
    for (std::string &tok : ref.encodePiece(piece))
      out.push_back(std::move(tok));
  return out;
}
std::string utf8(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += char(c);
  } else if (c < 0x800) {
    s += char(0xC0 | (c >> 6));
    s += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += char(0xE0 | (c >> 12));
    s += char(0x80 | ((c >> 6) & 0x3F));
    s += char(0x80 | (c & 0x3F));
  } else {
    s += char(0xF0 | (c >> 18));
    s += char(0x80 | ((c >> 12) & 0x3F));
    s += char(0x80 | ((c >> 6) & 0x3F));
    s += char(0x80 | (c & 0x3F));
  }
  return s;
}
/// A tokenizer from a vocabulary of GPT-2's 256 byte symbols plus `extra`
/// (ids from 256 on) and the merges `merges`, written into `dir`.
Tokenizer tinyTokenizer(const std::string &dir, const std::vector<std::string> &extra,
                        const std::string &merges) {
  std::string vocab = "{";
  int next = 256, id = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    std::string sym = utf8(printable ? char32_t(b) : char32_t(next++));
    if (sym == "\"" || sym == "\\")
      sym = "\\" + sym;
    vocab += (b ? ", \"" : "\"") + sym + "\": " + std::to_string(id++);
  }
  for (const std::string &tok : extra)
    vocab += ", \"" + tok + "\": " + std::to_string(id++);
  vocab += "}";
  std::ofstream(dir + "/tiny.json") << vocab;
  std::ofstream(dir + "/tiny.bpe") << "#version: 0.2\n" << merges;
  return Tokenizer::load(dir + "/tiny.json", dir + "/tiny.bpe");
}
} // namespace

TEST_CASE("BPE merges exactly as GPT-2's reference code does") {
  test::ReferenceBpe ref(vocabDir() + "/vocab.bpe");
  auto same = [&](const std::string &text) {
    CAPTURE(text);
    CHECK(tokenBytes(tok(), tok().encode(text)) == referenceTokens(ref, text));
  };
  // Random words over small alphabets: runs of one symbol, overlapping
  // occurrences of one pair ("aaa" with "a a"), many merges of one rank.
  std::mt19937 rng(7);
  for (const char *alphabet :
       {"a", "ab", "abc", "etaoin", "thequickbrownfx", "01", "0123456789", "!=", "-=_*", " ", "\n"})
    for (int k = 0; k < 12; ++k) {
      std::string word;
      std::size_t len = 1 + rng() % 300, n = std::strlen(alphabet);
      for (std::size_t i = 0; i < len; ++i)
        word += alphabet[rng() % n];
      same(word);
    }
  // Letters of two bytes, and words longer than any cached piece.
  std::string accents;
  for (int i = 0; i < 200; ++i)
    accents += i % 3 ? "é" : "a";
  same(accents);
  std::string longWord;
  for (int i = 0; i < 3000; ++i)
    longWord += char('a' + rng() % 26);
  same(longWord);
  same("The quick brown fox jumps over the lazy dog; it'll be 1,234.56 dollars, won't it? "
       "Übermäßig schöne Straße, naïve façade, 東京都の天気は晴れ、서울은 비. "
       "def parse(x):\n    return {k: v for k, v in x.items() if v}  # comment\n\n\n"
       "https://example.com/path?query=value&other=123#frag   \t end");
}

TEST_CASE("pieces of 200k letters, digits or symbols encode and decode back") {
  std::mt19937 rng(11);
  auto random = [&](const std::string &alphabet, std::size_t n) {
    std::string s;
    for (std::size_t i = 0; i < n; ++i)
      s += alphabet[rng() % alphabet.size()];
    return s;
  };
  const std::size_t n = 200000;
  std::vector<std::string> texts = {
      random("abcdefghijklmnopqrstuvwxyz", n),   std::string(n, 'a'),  random("0123456789", n),
      random("!#$%&()*+,-./:;<=>?@[]^_{|}~", n), std::string(n, '\n'), std::string(n, ' ') + "x"};
  std::string accents;
  for (std::size_t i = 0; i < n / 2; ++i)
    accents += "é";
  texts.push_back(accents);
  for (const std::string &text : texts) {
    CAPTURE(text.substr(0, 20));
    REQUIRE(Tokenizer::split(text).size() <= 2);
    std::vector<int32_t> ids = tok().encode(text);
    CHECK(ids.size() < text.size());
    CHECK(tok().decode(ids) == text);
  }
}

TEST_CASE("a merge's new pairs of lower rank wait until its sweep is done") {
  test::TempDir dir("tokenizer-merges");
  // "ab a" ranks before "a b", which makes "ab": the reference merges every
  // "a b" of the word first, so "abab" is "ab" "ab", not "aba" "b".
  Tokenizer t = tinyTokenizer(dir.path, {"ab", "aba", "aa", "cde"}, "ab a\na b\na a\nc d\ncd e\n");
  using V = std::vector<std::string>;
  CHECK(tokenBytes(t, t.encode("abab")) == V{"ab", "ab"});
  CHECK(tokenBytes(t, t.encode("aba")) == V{"aba"});
  CHECK(tokenBytes(t, t.encode("aaa")) == V{"aa", "a"});
  CHECK(tokenBytes(t, t.encode("aaaaa")) == V{"aa", "aa", "a"});
  // "cd" is not in the vocabulary: fine as a step towards "cde", an error as
  // a final token.
  CHECK(tokenBytes(t, t.encode("cde")) == V{"cde"});
  CHECK_THROWS_WITH_AS(t.encode("cd"), doctest::Contains("no token for a merge result"), Error);
  test::ReferenceBpe ref(dir.path + "/tiny.bpe");
  std::mt19937 rng(3);
  for (int k = 0; k < 200; ++k) {
    std::string word;
    for (std::size_t i = 0, len = 1 + rng() % 40; i < len; ++i)
      word += "ab"[rng() % 2];
    CAPTURE(word);
    CHECK(tokenBytes(t, t.encode(word)) == referenceTokens(ref, word));
  }
}

TEST_CASE("encode with a token limit gives up once the text needs more") {
  for (std::string text : {"Hello world", "a<|endoftext|>b<|endoftext|>", "<|endoftext|>",
                           "don't stop   me\n\nnow 12345", "x"}) {
    CAPTURE(text);
    std::vector<int32_t> ids = tok().encode(text);
    REQUIRE(!ids.empty());
    CHECK(tok().encode(text, ids.size()) == ids);
    CHECK(tok().encode(text, ids.size() + 100) == ids);
    CHECK(tok().encode(text, ids.size() - 1) == std::nullopt);
    CHECK(tok().encode(text, 0) == std::nullopt);
  }
  CHECK(tok().encode("", 0) == std::vector<int32_t>{});
  // A prompt far too long for a context is turned down without being
  // tokenised, whether it has many pieces or one.
  std::string many, one(10 << 20, 'a');
  for (int i = 0; many.size() < (10 << 20); ++i)
    many += " word" + std::to_string(i);
  CHECK(tok().encode(many, 1024) == std::nullopt);
  CHECK(tok().encode(one, 1024) == std::nullopt);
  // One word of 2000 letters is 1000 tokens or so: a limit in the middle of it.
  std::string word;
  for (int i = 0; i < 2000; ++i)
    word += char('a' + (i * 7) % 26);
  std::size_t n = tok().encode(word).size();
  CHECK(tok().encode(word, n / 2) == std::nullopt);
  CHECK(tok().encode(word, n)->size() == n);
}

TEST_CASE("white space and letters are HF's, not Python's") {
  using V = std::vector<int32_t>;
  // U+001C..U+001F are white space to Python's str.isspace only.
  CHECK(tok().encode("\n\n\x1c") == V{198, 198, 216});
  CHECK(tok().encode("\x1c\x1d\x1e\x1f\n") == V{216, 217, 218, 219, 198});
  CHECK(tok().encode("a \x1f b") == V{64, 220, 219, 275});
  // Letters and numbers of Unicode versions after 14 (Kawi, Ol Onal).
  CHECK(tok().encode("\U00011F08蟾") == V{172, 239, 120, 42062, 253, 122});
  CHECK(
      tok().encode(" \U0001E5D1\U0001E5D2 \U0001E5F1\U0001E5F2") ==
      V{220, 172, 252, 245, 239, 172, 252, 245, 240, 220, 172, 252, 245, 109, 172, 252, 245, 110});
  // Edge cases of the pattern, with HF's ids.
  CHECK(tok().encode("x's 'S 're") == V{87, 338, 705, 50, 705, 260});
  CHECK(tok().encode("\xc2\xa0\xc2\xa0x") == V{1849, 1849, 87});
  CHECK(tok().encode("a\u3000\u3000b") == V{64, 5099, 222, 5099, 222, 65});
  CHECK(tok().encode("  \u2028x") == V{220, 220, 447, 101, 87});
  CHECK(tok().encode("it'll've'd") == V{270, 1183, 1053, 1549});
  CHECK(tok().encode("7\u2167 x\u0301") == V{22, 158, 227, 100, 2124, 136, 223});
  CHECK(tok().encode("end \n") == V{437, 220, 198});
}

TEST_CASE("every code point has HF's class in the pre-tokenisation") {
  // tests/gpt2/data/code_point_classes.txt: HF's class of every code point,
  // as scripts/gen_unicode_tables.mjs found it.
  std::vector<char> want(0x110000, '-');
  std::istringstream in(slurp(testData() + "/code_point_classes.txt"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    unsigned long lo = 0, hi = 0;
    char cls = 0;
    std::istringstream(line) >> std::hex >> lo >> hi >> cls;
    REQUIRE(lo <= hi);
    REQUIRE(hi < 0x110000);
    std::fill(want.begin() + long(lo), want.begin() + long(hi) + 1, cls);
  }
  // The class of c as the pre-tokenisation shows it; the contexts are
  // those the generator probes HF with (see scripts/hf_gpt2_tokenizer.mjs).
  auto classOf = [](char32_t c) {
    std::string s = utf8(c);
    std::string probes[] = {"a" + s + "1", "1" + s + "a", "!" + s + "a", "a\t\t" + s + "a"};
    bool letter = Tokenizer::split(probes[0])[0] == "a" + s;
    bool number = Tokenizer::split(probes[1])[0] == "1" + s;
    bool other = Tokenizer::split(probes[2])[0] == "!" + s;
    bool space = Tokenizer::split(probes[3])[1] == "\t\t";
    if (letter + number + other + space != 1)
      return '?';
    return letter ? 'L' : number ? 'N' : other ? 'O' : 'S';
  };
  int wrong = 0, missing = 0;
  for (char32_t c = 0; c < 0x110000; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF)
      continue;
    if (want[c] == '-') {
      ++missing;
      continue;
    }
    char got = classOf(c);
    if (got != want[c] && ++wrong <= 20) {
      char what[64];
      std::snprintf(what, sizeof what, "U+%04X is %c in kiln, %c in HF", unsigned(c), got, want[c]);
      FAIL_CHECK(what);
    }
  }
  CHECK(missing == 0);
  CHECK(wrong == 0);
}

TEST_CASE("random texts encode as HF does") {
  // tests/gpt2/data/tokenizer_random.txt, from scripts/gen_unicode_tables.mjs.
  std::istringstream in(slurp(testData() + "/tokenizer_random.txt"));
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    auto tab = line.find('\t');
    REQUIRE(tab != std::string::npos);
    std::string text;
    for (std::size_t i = 0; i + 1 < tab; i += 2)
      text += char(std::stoi(line.substr(i, 2), nullptr, 16));
    std::vector<int32_t> want;
    std::istringstream ids(line.substr(tab + 1));
    for (int32_t id; ids >> id;)
      want.push_back(id);
    CAPTURE(text);
    CHECK(tok().encode(text) == want);
    CHECK(tok().decode(want) == text);
    ++cases;
  }
  CHECK(cases >= 100);
}
