//===- test_model_files.cpp - hostile model directories and checkpoints ---===//
//
// Every file GPT-2 reads, damaged the ways a bad download, a buggy exporter
// or an attacker would damage it. Each case must end in one kiln::Error that
// says what is wrong — never a crash, an allocation that cannot succeed, a
// hang, or weights read from the wrong bytes.
//
//===----------------------------------------------------------------------===//
#include <doctest/doctest.h>

#include "support/llmc.hpp"
#include "support/temp_dir.hpp"
#include "kiln/gpt2/tokenizer.hpp"
#include "kiln/gpt2/weights.hpp"
#include "kiln/core/error.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <sys/stat.h>

using namespace kiln;
using namespace kiln::gpt2;
namespace fs = std::filesystem;

namespace {

Config tiny() {
  Config c;
  c.n_layer = 1, c.n_head = 2, c.n_embd = 32, c.vocab_size = 40, c.n_ctx = 16;
  return c;
}

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}
std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A safetensors file of `w` in F32, its header padded with `pad` spaces and
/// its length field adjusted by `lengthDelta`; `edit` may rewrite the header.
std::string safetensors(Weights &w, int pad = 8, int64_t lengthDelta = 0,
                        const std::function<void(std::string &)> &edit = {}) {
  std::string header = "{";
  std::string data;
  auto all = w.named();
  for (std::size_t i = 0; i < all.size(); ++i) {
    auto &[name, t] = all[i];
    std::string shape = "[";
    for (std::size_t d = 0; d < t->shape.size(); ++d)
      shape += (d ? "," : "") + std::to_string(t->shape[d]);
    shape += "]";
    header += (i ? "," : "") + std::string("\"") + name +
              "\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[" +
              std::to_string(data.size()) + "," + std::to_string(data.size() + t->data.size() * 4) +
              "]}";
    data.append(reinterpret_cast<const char *>(t->data.data()), t->data.size() * 4);
  }
  header += "}";
  if (edit)
    edit(header);
  header += std::string(std::size_t(pad), ' ');
  uint64_t n = uint64_t(int64_t(header.size()) + lengthDelta);
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

std::string configJson(const std::string &overrides = "") {
  Config c = tiny();
  std::string s = "{\"n_layer\": " + std::to_string(c.n_layer) +
                  ", \"n_head\": " + std::to_string(c.n_head) +
                  ", \"n_embd\": " + std::to_string(c.n_embd) +
                  ", \"vocab_size\": " + std::to_string(c.vocab_size) +
                  ", \"n_positions\": " + std::to_string(c.n_ctx);
  return s + overrides + "}";
}

/// An llm.c checkpoint (version 3, fp32) of `w` with header fields `h`.
std::string llmc(Weights &w, std::vector<int32_t> h, int64_t Vp) {
  return test::llmc_bytes(w, h, Vp, 3);
}

std::vector<int32_t> llmcHeader(const Config &c, int32_t version = 3, int32_t Vp = 48) {
  return {20240326, version, c.n_ctx, c.vocab_size, c.n_layer, c.n_head, c.n_embd, Vp};
}

#define CHECK_ERROR(expr, text) CHECK_THROWS_WITH_AS(expr, doctest::Contains(text), Error)

} // namespace

TEST_CASE("safetensors: the header and the data must agree exactly") {
  test::TempDir dir("adv-st");
  Weights w = Weights::random(tiny(), 1);
  std::string path = dir.path + "/m.safetensors";
  writeFile(path, safetensors(w));
  Weights back = Weights::from_safetensors(path, tiny()); // the unharmed file loads
  CHECK(back.wte.data == w.wte.data);

  // A header length 1..6 bytes short still parses (the cut falls in the
  // padding) but would read every tensor from the wrong byte.
  for (int delta = 1; delta <= 6; ++delta) {
    CAPTURE(delta);
    writeFile(path, safetensors(w, 8, -delta));
    CHECK_ERROR(Weights::from_safetensors(path, tiny()), "follow the header");
  }
  writeFile(path, safetensors(w, 8, +3));
  CHECK_ERROR(Weights::from_safetensors(path, tiny()), "malformed JSON");
  writeFile(path, safetensors(w, 8, 1 << 30));
  CHECK_ERROR(Weights::from_safetensors(path, tiny()), "header length");

  auto withHeader = [&](const std::function<void(std::string &)> &edit) {
    writeFile(path, safetensors(w, 8, 0, edit));
    return path;
  };
  auto replace = [](std::string from, std::string to) {
    return [=](std::string &h) {
      auto at = h.find(from);
      REQUIRE(at != std::string::npos);
      h.replace(at, from.size(), to);
    };
  };
  // wpe's bytes overlapping wte's: offsets that alias.
  std::string wpeOffsets = "\"data_offsets\":[" + std::to_string(40 * 32 * 4) + ",";
  CHECK_ERROR(
      Weights::from_safetensors(
          withHeader(replace("\"wpe.weight\":{\"dtype\":\"F32\",\"shape\":[16,32]," + wpeOffsets,
                             "\"wpe.weight\":{\"dtype\":\"F32\",\"shape\":[16,32],"
                             "\"data_offsets\":[4,")),
          tiny()),
      "data offsets");
  // A duplicate key: the first wte would be silently replaced.
  CHECK_ERROR(
      Weights::from_safetensors(
          withHeader(replace("{\"wte.weight\"", "{\"wte.weight\":{},\"wte.weight\"")), tiny()),
      "duplicate key \"wte.weight\"");
  // Non-integers where integers belong.
  CHECK_ERROR(Weights::from_safetensors(
                  withHeader(replace("\"shape\":[16,32]", "\"shape\":[16.2,32]")), tiny()),
              "must be an integer");
  CHECK_ERROR(Weights::from_safetensors(
                  withHeader(replace("\"data_offsets\":[0,", "\"data_offsets\":[0.5,")), tiny()),
              "must be an integer");
  CHECK_ERROR(Weights::from_safetensors(
                  withHeader(replace("\"shape\":[16,32]", "\"shape\":[16,\"32\"]")), tiny()),
              "must be an integer");
  CHECK_ERROR(Weights::from_safetensors(
                  withHeader(replace("\"shape\":[16,32]", "\"shape\":[16,-32]")), tiny()),
              "must be an integer in [0");
  CHECK_ERROR(
      Weights::from_safetensors(
          withHeader(replace("\"shape\":[16,32]", "\"shape\":[16,9223372036854775807]")), tiny()),
      "must be an integer in [0");
  CHECK_ERROR(Weights::from_safetensors(
                  withHeader(replace("\"dtype\":\"F32\"", "\"dtype\":\"Q4\"")), tiny()),
              "not a safetensors dtype");
  CHECK_ERROR(
      Weights::from_safetensors(withHeader(replace("\"dtype\":\"F32\"", "\"dtype\":7")), tiny()),
      "not a safetensors dtype");
  CHECK_ERROR(
      Weights::from_safetensors(withHeader(replace("{\"wte.weight\"", "[{\"wte.weight\"")), tiny()),
      "does not start with '{'");
  // A gap after the last tensor: bytes no tensor accounts for.
  std::string padded = safetensors(w) + std::string(4, '\0');
  writeFile(path, padded);
  CHECK_ERROR(Weights::from_safetensors(path, tiny()), "follow the header");
  // Cut anywhere: never a crash, always an error.
  std::string whole = safetensors(w);
  for (std::size_t cut : {std::size_t(0), std::size_t(3), std::size_t(8), std::size_t(20),
                          whole.size() / 2, whole.size() - 1}) {
    CAPTURE(cut);
    writeFile(path, whole.substr(0, cut));
    CHECK_THROWS_AS(Weights::from_safetensors(path, tiny()), Error);
  }
}

TEST_CASE("safetensors: non-finite weights are refused with the tensor's name") {
  test::TempDir dir("adv-nan");
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    Weights w = Weights::random(tiny(), 2);
    w.layers[0].c_fc_w.data[77] = bad;
    writeFile(dir.path + "/m.safetensors", safetensors(w));
    CHECK_ERROR(Weights::from_safetensors(dir.path + "/m.safetensors", tiny()),
                "tensor 'h.0.mlp.c_fc.weight' holds");
  }
}

TEST_CASE("config.json: integers in range, or a message") {
  test::TempDir dir("adv-config");
  std::string path = dir.path + "/config.json";
  auto config = [&](const std::string &text) {
    writeFile(path, text);
    return read_hf_config(path);
  };
  CHECK(config(configJson()).n_embd == 32);
  CHECK_ERROR(config(configJson(", \"n_layer\": 1000000000")), "duplicate key");
  std::string huge = "{\"n_layer\": 1000000000, \"n_head\": 2, \"n_embd\": 32, \"vocab_size\": 40, "
                     "\"n_positions\": 16}";
  CHECK_ERROR(config(huge), "'n_layer' must be an integer in [1, 1024]");
  CHECK_ERROR(config("{\"n_layer\": 1, \"n_head\": 1, \"n_embd\": 2147483647, \"vocab_size\": 40, "
                     "\"n_positions\": 16}"),
              "'n_embd' must be an integer in [1, 65536]");
  CHECK_ERROR(config("{\"n_layer\": 1, \"n_head\": 2, \"n_embd\": 32.5, \"vocab_size\": 40, "
                     "\"n_positions\": 16}"),
              "'n_embd' must be an integer");
  CHECK_ERROR(config("{\"n_layer\": 1, \"n_head\": 2, \"n_embd\": 1e300, \"vocab_size\": 40, "
                     "\"n_positions\": 16}"),
              "'n_embd' must be an integer");
  CHECK_ERROR(config("{\"n_layer\": 1, \"n_head\": 2, \"n_embd\": 32, \"vocab_size\": 40, "
                     "\"n_positions\": 1e400}"),
              "malformed JSON");
  CHECK_ERROR(config("[1, 2]"), "expected a JSON object");
  CHECK_ERROR(config(std::string(100000, '[')), "malformed JSON");
  CHECK_ERROR(config("{\"n_layer\": \"\xff\"}"), "malformed JSON");
  // The parameter count of an absurd config is not a signed overflow.
  Config c = tiny();
  c.n_embd = 2147483647;
  CHECK(c.num_params() > 0);
  CHECK_ERROR(c.validate(), "at most 1024 layers");
}

TEST_CASE("model directories: what the path is, said plainly") {
  test::TempDir dir("adv-dir");
  Weights w = Weights::random(tiny(), 3);
  writeFile(dir.path + "/file", "x");
  CHECK_ERROR(Weights::from_hf_dir(dir.path + "/file"), "expects a directory");
  CHECK_ERROR(Weights::from_hf_dir(dir.path + "/none"), "does not exist");
  // config.json that is a directory, a FIFO, a symlink loop.
  fs::create_directories(dir.path + "/m/config.json");
  writeFile(dir.path + "/m/model.safetensors", safetensors(w));
  CHECK_ERROR(Weights::from_hf_dir(dir.path + "/m"), "is a directory, expected a file");
  fs::remove(dir.path + "/m/config.json");
  REQUIRE(::mkfifo((dir.path + "/m/config.json").c_str(), 0600) == 0);
  CHECK_ERROR(Weights::from_hf_dir(dir.path + "/m"), "is not a regular file");
  fs::remove(dir.path + "/m/config.json");
  fs::create_symlink("config.json", dir.path + "/m/config.json");
  CHECK_THROWS_AS(Weights::from_hf_dir(dir.path + "/m"), Error);
  fs::remove(dir.path + "/m/config.json");
  fs::create_symlink("loop", dir.path + "/loop");
  CHECK_THROWS_AS(Weights::from_hf_dir(dir.path + "/loop"), Error);
  // A model.safetensors FIFO must not block.
  writeFile(dir.path + "/m/config.json", configJson());
  fs::remove(dir.path + "/m/model.safetensors");
  REQUIRE(::mkfifo((dir.path + "/m/model.safetensors").c_str(), 0600) == 0);
  CHECK_ERROR(Weights::from_hf_dir(dir.path + "/m"), "is not a regular file");
}

TEST_CASE("llm.c checkpoints: the header must describe the body exactly") {
  test::TempDir dir("adv-llmc");
  Weights w = Weights::random(tiny(), 4);
  std::string path = dir.path + "/m.bin";
  writeFile(path, llmc(w, llmcHeader(tiny()), 48));
  Weights back = Weights::from_llmc(path);
  CHECK(back.layers[0].c_fc_w.data == w.layers[0].c_fc_w.data);
  CHECK(back.wte.data == w.wte.data);

  // A padded vocabulary smaller than the vocabulary read past wte's buffer.
  writeFile(path, llmc(w, llmcHeader(tiny(), 3, 20), 20));
  CHECK_ERROR(Weights::from_llmc(path), "padded vocabulary 20 is smaller than the vocabulary 40");
  // Sizes that do not describe the body: shifted weights unless the size is
  // checked. (A smaller vocabulary with the same padding is legitimate.)
  for (auto edit : std::initializer_list<std::function<void(Config &)>>{
           [](Config &c) { c.n_ctx = 8; }, [](Config &c) { c.n_head = 1, c.n_embd = 16; },
           [](Config &c) { c.n_layer = 2; }}) {
    Config c = tiny();
    edit(c);
    writeFile(path, llmc(w, llmcHeader(c), 48));
    CHECK_ERROR(Weights::from_llmc(path), "a header that does not match");
  }
  // Version 5 (bf16) over an fp32 body.
  writeFile(path, llmc(w, llmcHeader(tiny(), 5), 48));
  CHECK_ERROR(Weights::from_llmc(path), "version-5 checkpoint");
  // Huge sizes: refused from the header, before any allocation.
  for (std::vector<int32_t> h : {std::vector<int32_t>{20240326, 3, 2147483647, 40, 1, 2, 32, 48},
                                 {20240326, 3, 16, 40, 2147483647, 2, 32, 48},
                                 {20240326, 3, 16, 2147483647, 1, 2, 32, 0},
                                 {20240326, 3, 16, 40, 1, 2, 2147483646, 48},
                                 {20240326, 3, 16, 40, 1, 0, 32, 48},
                                 {20240326, 3, -16, 40, 1, 2, 32, 48}}) {
    writeFile(path, llmc(w, h, 48));
    CHECK_ERROR(Weights::from_llmc(path), "unusable config");
  }
  writeFile(path, llmc(w, llmcHeader(tiny()), 48).substr(0, 2000));
  CHECK_ERROR(Weights::from_llmc(path), "truncated");
  writeFile(path, "short");
  CHECK_ERROR(Weights::from_llmc(path), "shorter than an llm.c header");
  w.wpe.data[5] = NAN;
  writeFile(path, llmc(w, llmcHeader(tiny()), 48));
  CHECK_ERROR(Weights::from_llmc(path), "tensor 'wpe.weight' holds NaN at element 5");
  CHECK_ERROR(Weights::from_llmc("/dev/null"), "not a regular file");
  CHECK_ERROR(Weights::from_llmc(dir.path), "is a directory");
}

TEST_CASE("sizes beyond the machine are refused before allocating") {
  Config c;
  c.n_layer = 1024, c.n_head = 512, c.n_embd = 65536;
  CHECK_ERROR(Weights::random(c, 1), "of host memory");
}

TEST_CASE("tokenizer files: ids in range, no duplicate keys, regular files") {
  test::TempDir dir("adv-tok");
  writeFile(dir.path + "/m.txt", "a b\n");
  writeFile(dir.path + "/big.json", "{\"a\": 2147483647}");
  CHECK_ERROR(Tokenizer::load(dir.path + "/big.json", dir.path + "/m.txt"),
              "the id of token 'a' must be an integer in [0,");
  writeFile(dir.path + "/dup.json", "{\"a\": 1, \"a\": 2}");
  CHECK_ERROR(Tokenizer::load(dir.path + "/dup.json", dir.path + "/m.txt"), "duplicate key");
  writeFile(dir.path + "/frac.json", "{\"a\": 1.5}");
  CHECK_ERROR(Tokenizer::load(dir.path + "/frac.json", dir.path + "/m.txt"), "must be an integer");
  REQUIRE(::mkfifo((dir.path + "/fifo.json").c_str(), 0600) == 0);
  CHECK_ERROR(Tokenizer::load(dir.path + "/fifo.json", dir.path + "/m.txt"),
              "is not a regular file");
  fs::create_directories(dir.path + "/d.json");
  CHECK_ERROR(Tokenizer::load(dir.path + "/d.json", dir.path + "/m.txt"), "is a directory");
}
