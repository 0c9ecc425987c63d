//===- test_tokenizer.cpp - GPT-2's BPE against HF's ids -------------------===//
#include <doctest/doctest.h>

#include "../../transformer/lib/Json.h"
#include "../support/temp_dir.hpp"
#include "kiln/gpt2/tokenizer.hpp"
#include "kiln/runtime/kernel.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace kiln;
using gpt2::Tokenizer;
namespace json = gpt2::json;

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
  json::Value cases =
      json::parse(slurp(testData() + "/tokenizer_golden.json"), "tokenizer_golden.json");
  REQUIRE(cases.array.size() >= 10);
  for (const json::Value &c : cases.array) {
    const std::string &text = c.find("text")->string;
    std::vector<int32_t> want;
    for (const json::Value &id : c.find("ids")->array)
      want.push_back(int32_t(id.number));
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
