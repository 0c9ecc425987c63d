//===- test_model.cpp - GPT-2 weights and forward pass against HF ----------===//
//
// Compiled once, linked twice: for the CPU (fp32, in CI) and for the GPU
// (suite "gpu-only": 124M against HF in the same run, fp16 and bf16).
// The golden data come from HF transformers' GPT2LMHeadModel on the same
// seeded weights (tests/gpt2/make_golden.py).
//
//===----------------------------------------------------------------------===//
#include <doctest/doctest.h>

#include "support/llmc.hpp"
#include "support/target.hpp"
#include "support/temp_dir.hpp"
#include "kiln/gpt2/model.hpp"
#include "kiln/runtime/cuda.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

using namespace kiln;
using namespace kiln::gpt2;

namespace {
using test::target;

/// Where the committed golden data are ($KILN_GPT2_TEST_DATA overrides the
/// source-tree path, e.g. on a machine that runs packed binaries).
std::string testData() {
  const char *env = std::getenv("KILN_GPT2_TEST_DATA");
  return env ? env : KILN_GPT2_TEST_DATA;
}

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in, "missing " << path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Golden {
  Config config;
  uint64_t seed;
  std::vector<int32_t> prompt, greedy;
  std::vector<std::vector<float>> logits; // [T][V] when present
  std::vector<float> last;
  std::vector<float> gaps;
};

Golden readGolden(const std::string &path) {
  auto g = nlohmann::json::parse(slurp(path));
  Golden out;
  const auto &c = g.at("config");
  out.config.n_layer = c.at("n_layer").get<int>();
  out.config.n_head = c.at("n_head").get<int>();
  out.config.n_embd = c.at("n_embd").get<int>();
  out.config.vocab_size = c.at("vocab_size").get<int>();
  out.config.n_ctx = c.at("n_ctx").get<int>();
  out.seed = g.at("seed").get<uint64_t>();
  out.prompt = g.at("prompt").get<std::vector<int32_t>>();
  out.greedy = g.at("greedy").get<std::vector<int32_t>>();
  out.gaps = g.at("top2_gaps").get<std::vector<float>>();
  out.last = g.at("last_logits").get<std::vector<float>>();
  if (auto l = g.find("logits"); l != g.end() && l->is_array())
    out.logits = l->get<std::vector<std::vector<float>>>();
  return out;
}

Config tinyConfig() {
  Config c;
  c.n_layer = 2, c.n_head = 4, c.n_embd = 64, c.vocab_size = 512, c.n_ctx = 128;
  return c;
}

[[maybe_unused]] bool sameWeights(Weights &a, Weights &b) {
  auto na = a.named(), nb = b.named();
  if (na.size() != nb.size())
    return false;
  for (std::size_t i = 0; i < na.size(); ++i)
    if (na[i].second->shape != nb[i].second->shape || na[i].second->data != nb[i].second->data)
      return false;
  return true;
}
} // namespace

TEST_SUITE_BEGIN("cpu-only");
TEST_CASE("weights round-trip through a HF directory and an llm.c checkpoint") {
  test::TempDir dir("gpt2-weights");
  Weights w = Weights::random(tinyConfig(), 7);
  w.save_hf_dir(dir.path + "/hf");
  Weights back = Weights::from_hf_dir(dir.path + "/hf");
  CHECK(back.config.n_embd == 64);
  CHECK(sameWeights(w, back));
  CHECK(!sameWeights(w, *std::make_unique<Weights>(Weights::random(tinyConfig(), 8))));

  // llm.c checkpoints (version 3: fp32, version 5: bf16): projections stored
  // [out, in], vocab padded.
  auto writeLlmc = [&](const std::string &path, int version) {
    const Config &c = w.config;
    std::ofstream(path, std::ios::binary)
        << test::llmc_bytes(w, {20240326, version, c.n_ctx, c.vocab_size, c.n_layer, c.n_head,
                                c.n_embd, 576}, 576, version);
  };
  writeLlmc(dir.path + "/model.bin", 3);
  Weights fromLlmc = Weights::from_llmc(dir.path + "/model.bin");
  CHECK(sameWeights(w, fromLlmc));
  writeLlmc(dir.path + "/model_bf16.bin", 5);
  Weights rounded = w;
  for (auto &[name, t] : rounded.named())
    for (float &x : t->data)
      x = float(bfloat16(x));
  Weights fromBf16 = Weights::from_llmc(dir.path + "/model_bf16.bin");
  CHECK(sameWeights(rounded, fromBf16));
  std::filesystem::resize_file(dir.path + "/model.bin", 4096);
  CHECK_THROWS_WITH_AS(Weights::from_llmc(dir.path + "/model.bin"),
                       doctest::Contains("(truncated, or a header that does not match)"), Error);
}

TEST_CASE("fp16 and bf16 safetensors load as the values they hold") {
  test::TempDir dir("gpt2-half");
  Weights w = Weights::random(tinyConfig(), 3);
  // Rewrite the fp32 file with 16-bit tensors: fp16 for even, bf16 for odd tensors.
  auto all = w.named();
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  std::string data;
  auto toHalf = [](float f) { return half(f).bits; };
  auto toBf16 = [](float f) { return bfloat16(f).bits; };
  for (std::size_t i = 0; i < all.size(); ++i) {
    auto &[name, t] = all[i];
    bool fp16 = i % 2 == 0;
    std::string shape = "[";
    for (std::size_t d = 0; d < t->shape.size(); ++d)
      shape += (d ? "," : "") + std::to_string(t->shape[d]);
    shape += "]";
    header += ",\"transformer." + name + "\":{\"dtype\":\"" + (fp16 ? "F16" : "BF16") +
              "\",\"shape\":" + shape + ",\"data_offsets\":[" + std::to_string(data.size()) + "," +
              std::to_string(data.size() + t->data.size() * 2) + "]}";
    for (float &x : t->data) {
      uint16_t bits = fp16 ? toHalf(x) : toBf16(x);
      data.append(reinterpret_cast<const char *>(&bits), 2);
      // What the file holds, decoded by the host types.
      if (fp16) {
        half h;
        h.bits = bits;
        x = float(h);
      } else {
        bfloat16 h;
        h.bits = bits;
        x = float(h);
      }
    }
  }
  header += "}";
  std::filesystem::create_directories(dir.path + "/m");
  std::ofstream out(dir.path + "/m/model.safetensors", std::ios::binary);
  uint64_t n = header.size();
  out.write(reinterpret_cast<const char *>(&n), 8);
  out << header << data;
  out.close();
  Weights back = Weights::from_safetensors(dir.path + "/m/model.safetensors", tinyConfig());
  CHECK(sameWeights(w, back));
}

TEST_CASE("bad model files say exactly what is wrong") {
  test::TempDir dir("gpt2-bad");
  Weights w = Weights::random(tinyConfig(), 1);
  w.save_hf_dir(dir.path + "/ok");
  CHECK_THROWS_WITH_AS(Weights::from_hf_dir(dir.path + "/nope"),
                       doctest::Contains("does not exist"), Error);
  std::filesystem::create_directories(dir.path + "/empty");
  CHECK_THROWS_WITH_AS(Weights::from_hf_dir(dir.path + "/empty"),
                       doctest::Contains("has no config.json"), Error);
  // A config that does not match the tensors.
  Config wider = tinyConfig();
  wider.n_embd = 128;
  CHECK_THROWS_WITH_AS(
      Weights::from_safetensors(dir.path + "/ok/model.safetensors", wider),
      doctest::Contains("tensor 'h.0.attn.c_attn.bias' has shape [192], expected [384]"), Error);
  Config deeper = tinyConfig();
  deeper.n_layer = 3;
  CHECK_THROWS_WITH_AS(Weights::from_safetensors(dir.path + "/ok/model.safetensors", deeper),
                       doctest::Contains("missing tensor 'h.2.attn.c_attn.bias'"), Error);
  Config shallower = tinyConfig();
  shallower.n_layer = 1;
  CHECK_THROWS_WITH_AS(Weights::from_safetensors(dir.path + "/ok/model.safetensors", shallower),
                       doctest::Contains("unexpected tensor 'h.1."), Error);
  // A dtype kiln does not read, and a truncated file.
  std::string bytes = slurp(dir.path + "/ok/model.safetensors");
  std::string i32 = bytes;
  auto at = i32.find("\"F32\"");
  i32.replace(at, 5, "\"I32\"");
  std::ofstream(dir.path + "/i32.safetensors", std::ios::binary) << i32;
  CHECK_THROWS_WITH_AS(Weights::from_safetensors(dir.path + "/i32.safetensors", tinyConfig()),
                       doctest::Contains("has dtype I32; supported: F32, F16, BF16"), Error);
  std::ofstream(dir.path + "/short.safetensors", std::ios::binary)
      << bytes.substr(0, bytes.size() / 2);
  CHECK_THROWS_WITH_AS(Weights::from_safetensors(dir.path + "/short.safetensors", tinyConfig()),
                       doctest::Contains("truncated or extended file"), Error);
  std::ofstream(dir.path + "/junk.safetensors", std::ios::binary) << "not a model";
  CHECK_THROWS_WITH_AS(Weights::from_safetensors(dir.path + "/junk.safetensors", tinyConfig()),
                       doctest::Contains("not a safetensors file"), Error);
  CHECK_THROWS_WITH_AS(Config::preset("7B"), doctest::Contains("unknown model size '7B'"), Error);
}
TEST_SUITE_END();

TEST_CASE("the tiny model's logits and greedy tokens match HF transformers") {
  Golden g = readGolden(testData() + "/tiny_golden.json");
  Weights w = Weights::random(g.config, g.seed);
  ModelOptions mo;
  mo.max_batch = 3;
  Model model(w, target(), Precision::F32, mo);
  std::vector<float> logits = model.logits(g.prompt);
  REQUIRE(logits.size() == g.logits.size() * std::size_t(g.config.vocab_size));
  double worst = 0;
  for (std::size_t t = 0; t < g.logits.size(); ++t)
    for (std::size_t v = 0; v < g.logits[t].size(); ++v)
      worst =
          std::max(worst, double(std::abs(logits[t * g.config.vocab_size + v] - g.logits[t][v])));
  MESSAGE("max |logit - HF| = " << worst);
  CHECK(worst < 1e-4);

  GenerateOptions go;
  go.max_new_tokens = int(g.greedy.size());
  go.stop_at_eot = false;
  auto out = model.generate({g.prompt}, go);
  CHECK(out.at(0) == g.greedy);

  // Prompts of different lengths in one batch give what each gives alone.
  std::vector<int32_t> shortPrompt(g.prompt.begin(), g.prompt.begin() + 3);
  go.max_new_tokens = 16;
  auto alone = model.generate({shortPrompt}, go);
  auto batch = model.generate({g.prompt, shortPrompt, g.prompt}, go);
  CHECK(batch.at(1) == alone.at(0));
  CHECK(batch.at(0) == std::vector<int32_t>(g.greedy.begin(), g.greedy.begin() + 16));
  CHECK(batch.at(2) == batch.at(0));
}

TEST_CASE("modes: max-autotune tunes every kernel of a prefill and a decode step once and keeps HF's logits") {
  CHECK(parse_mode("default") == Mode::Default);
  CHECK(parse_mode("reduce-overhead") == Mode::ReduceOverhead);
  CHECK(to_string(Mode::MaxAutotune) == "max-autotune");
  CHECK_THROWS_WITH_AS(parse_mode("fast"),
                       "gpt2: unknown mode 'fast' (default, reduce-overhead or max-autotune)", Error);
  CHECK_FALSE(apply_mode(Mode::Default, {}).cuda_graphs);
  CHECK(apply_mode(Mode::ReduceOverhead, {}).cuda_graphs);
  CHECK(apply_mode(Mode::MaxAutotune, {}).tuning == Tuning::Tune);

  test::TempDir dir("gpt2-modes");
  test::ScopedEnv cache("KILN_CACHE_DIR", dir.path);
  Golden g = readGolden(testData() + "/tiny_golden.json");
  Weights w = Weights::random(g.config, g.seed);
  // Which roles' configurations came from `source`.
  auto roles = [](const Model &m, const std::string &source) {
    std::string out;
    for (const auto &k : m.explain().kernels)
      if (k.source == source)
        out += (out.empty() ? "" : " ") + k.role;
    return out;
  };
  // A prefill's kernels: the embedding, attention, the cache write, the
  // layernorm (one kernel for all 25), the products, the last rows' gather.
  const std::string products = "attention_prefill attn_proj embedding fc_gelu gather kv_write layernorm "
                               "lm_head mlp_proj qkv";
  // A decode step's (one sequence): the 1-row kernels, attention, argmax
  // (the embedding and the layernorm share the prefill's 16-row tuning).
  const std::string decode = "argmax attention_decode attn_proj_decode1 decode_qkv1 fc_gelu_decode1 "
                             "lm_head_decode1 mlp_proj_decode1";
  {
    Model tuned(w, target(), Precision::F32, apply_mode(Mode::MaxAutotune, {}));
    CHECK(roles(tuned, "tuned").empty()); // nothing is tuned before a shape is seen
    std::vector<float> logits = tuned.logits(g.prompt);
    double worst = 0;
    for (std::size_t t = 0; t < g.logits.size(); ++t)
      for (std::size_t v = 0; v < g.logits[t].size(); ++v)
        worst = std::max(worst, double(std::abs(logits[t * g.config.vocab_size + v] - g.logits[t][v])));
    CHECK(worst < 1e-4);
    // Every layer's product of a role shares one tuned kernel.
    CHECK(roles(tuned, "tuned") == products);
    CHECK(tuned.explain().tuning_seconds > 0);
    GenerateOptions go;
    go.max_new_tokens = int(g.greedy.size());
    go.stop_at_eot = false;
    CHECK(tuned.generate({g.prompt}, go).at(0) == g.greedy);
    // The generation tuned the decode step's kernels first, and its prompt
    // (as long as the one above) nothing new.
    std::string all = roles(tuned, "tuned");
    CHECK(all.size() == products.size() + decode.size() + 1);
    for (const char *role : {"attention_decode", "decode_qkv1", "mlp_proj_decode1", "lm_head_decode1"})
      CHECK(all.find(role) != std::string::npos);
  }
  // The default mode reads the winners back for the same shapes.
  Model plain(w, target(), Precision::F32, apply_mode(Mode::Default, {}));
  plain.logits(g.prompt);
  CHECK(roles(plain, "tuning cache") == products);
  CHECK(roles(plain, "tuned").empty());
  plain.generate({g.prompt}, GenerateOptions{});
  CHECK(roles(plain, "tuned").empty());
  CHECK(roles(plain, "tuning cache").size() == products.size() + decode.size() + 1);
}

TEST_CASE("batches decode alike on the decode-step kernels and on the prefill products") {
  Golden g = readGolden(testData() + "/tiny_golden.json");
  Weights w = Weights::random(g.config, g.seed);
  std::vector<int32_t> shortPrompt(g.prompt.begin(), g.prompt.begin() + 3);
  GenerateOptions go;
  go.max_new_tokens = 16;
  go.stop_at_eot = false;
  std::vector<std::vector<int32_t>> reference;
  for (int rows : {8, 2, 1, 0}) {
    CAPTURE(rows);
    ModelOptions mo;
    mo.max_batch = 3;
    mo.decode_kernel_rows = rows;
    Model model(w, target(), Precision::F32, mo);
    std::vector<std::string> roles;
    for (const auto &k : model.explain().kernels)
      roles.push_back(k.role);
    auto has = [&](const std::string &r) { return std::find(roles.begin(), roles.end(), r) != roles.end(); };
    // The ladder up to `rows`, and no further than 3 sequences need.
    CHECK(has("decode_qkv2") == (rows >= 2));
    CHECK(has("fc_gelu_decode2") == (rows >= 2));
    CHECK(has("decode_qkv4") == (rows >= 4));
    CHECK(has("mlp_proj_decode4") == (rows >= 4));
    CHECK_FALSE(has("decode_qkv8"));
    auto out = model.generate({g.prompt, shortPrompt, g.prompt}, go);
    CHECK(out.at(0) == std::vector<int32_t>(g.greedy.begin(), g.greedy.begin() + 16));
    if (reference.empty())
      reference = out;
    CHECK(out == reference);
  }
  // Each decode product bringing the next one's weight into L2 (the last
  // block's the head's): the same tokens, at 1 and at 3 sequences.
  ModelOptions ahead;
  ahead.max_batch = 3;
  ahead.decode_kernel_rows = 8;
  ahead.prefetch_weights = true;
  Model prefetching(w, target(), Precision::F32, ahead);
  CHECK(prefetching.generate({g.prompt, shortPrompt, g.prompt}, go) == reference);
  CHECK(prefetching.generate({g.prompt}, go).at(0) == reference.at(0));
  // Decode attention on the split kernels at every length (no keys held
  // in registers): the same tokens.
  ModelOptions split;
  split.max_batch = 3;
  split.resident_attention_keys = 0;
  Model splitting(w, target(), Precision::F32, split);
  CHECK(splitting.generate({g.prompt, shortPrompt, g.prompt}, go) == reference);
  ModelOptions bad;
  bad.decode_kernel_rows = 3;
  CHECK_THROWS_WITH_AS(Model(w, target(), Precision::F32, bad),
                       "gpt2: decode_kernel_rows must be 0, 1, 2, 4 or 8 (got 3)", Error);
  ModelOptions negative;
  negative.resident_attention_keys = -1;
  CHECK_THROWS_WITH_AS(Model(w, target(), Precision::F32, negative),
                       "gpt2: resident_attention_keys must be >= 0 (got -1)", Error);
  ModelOptions tooMany;
  tooMany.many_row_products = 65;
  CHECK_THROWS_WITH_AS(Model(w, target(), Precision::F32, tooMany),
                       "gpt2: many_row_products must be 0 to 64 (got 65)", Error);
}

TEST_CASE("the fused decode MLP: fp32 models keep the two products, three rows are refused") {
  Golden g = readGolden(testData() + "/tiny_golden.json");
  Weights w = Weights::random(g.config, g.seed);
  ModelOptions f32;
  f32.fused_mlp_rows = 2;
  Model exact(w, target(), Precision::F32, f32);
  for (const auto &k : exact.explain().kernels)
    CHECK(k.role.rfind("mlp_decode", 0) == std::string::npos);
  ModelOptions bad;
  bad.fused_mlp_rows = 3;
  CHECK_THROWS_WITH_AS(Model(w, target(), Precision::F32, bad), "gpt2: fused_mlp_rows must be 0, 1 or 2 (got 3)",
                       Error);
}

TEST_CASE("sampling: seeded, top-k 1 is greedy, bad options are refused") {
  Golden g = readGolden(testData() + "/tiny_golden.json");
  Weights w = Weights::random(g.config, g.seed);
  Model model(w, target(), Precision::F32);
  GenerateOptions go;
  go.max_new_tokens = 24;
  go.stop_at_eot = false;
  go.temperature = 0.8f;
  go.top_k = 1; // only the most likely token survives, whatever the temperature
  CHECK(model.generate({g.prompt}, go).at(0) ==
        std::vector<int32_t>(g.greedy.begin(), g.greedy.begin() + 24));
  go.top_k = 40;
  go.top_p = 0.9f;
  go.seed = 5;
  auto a = model.generate({g.prompt}, go).at(0), b = model.generate({g.prompt}, go).at(0);
  CHECK(a == b);
  go.seed = 6;
  auto c = model.generate({g.prompt}, go).at(0);
  CHECK(a != c);
  for (int32_t t : c)
    CHECK((t >= 0 && t < g.config.vocab_size));
  // Temperatures so small that 1/T overflows a float sample greedily, with
  // no top-k to hide it (they once gave NaN scores and token 0 forever).
  for (float tiny : {1e-40f, 1e-30f, 1e-12f}) {
    CAPTURE(tiny);
    GenerateOptions cold;
    cold.max_new_tokens = 24;
    cold.stop_at_eot = false;
    cold.temperature = tiny;
    cold.seed = 9;
    CHECK(model.generate({g.prompt}, cold).at(0) ==
          std::vector<int32_t>(g.greedy.begin(), g.greedy.begin() + 24));
  }
  go.top_p = 0;
  CHECK_THROWS_WITH_AS(model.generate({g.prompt}, go), doctest::Contains("top_p must be in (0, 1]"),
                       Error);
  go.top_p = 1;
  go.temperature = -1;
  CHECK_THROWS_WITH_AS(model.generate({g.prompt}, go), doctest::Contains("temperature must be"),
                       Error);
}

TEST_CASE("prompts the model cannot take are refused") {
  Weights w = Weights::random(tinyConfig(), 1);
  Model model(w, target(), Precision::F32);
  GenerateOptions go;
  CHECK_THROWS_WITH_AS(model.generate({std::vector<int32_t>(200, 1)}, go),
                       doctest::Contains("the context holds 128"), Error);
  CHECK_THROWS_WITH_AS(model.generate({{1, 2, 9999}}, go),
                       doctest::Contains("token id 9999 is outside"), Error);
  CHECK_THROWS_WITH_AS(model.generate({{}}, go), doctest::Contains("empty prompt"), Error);
  CHECK_THROWS_WITH_AS(model.generate({{1}, {2}}, go), doctest::Contains("at most 1"), Error);
}

TEST_SUITE_BEGIN("gpu-only");
namespace {
/// Golden data made in the same run on this machine (make_golden.py model 124M).
std::string goldenDir() {
  const char *dir = std::getenv("KILN_GPT2_GOLDEN");
  REQUIRE_MESSAGE(dir,
                  "set KILN_GPT2_GOLDEN to the folder make_golden.py wrote 124M_fp32.json into");
  return dir;
}
} // namespace

TEST_CASE("GPT-2 124M on the GPU matches HF transformers in fp32, fp16 and bf16") {
  Golden g = readGolden(goldenDir() + "/124M_fp32.json");
  Weights w = Weights::random(g.config, g.seed);
  for (Precision p : {Precision::F32, Precision::F16, Precision::BF16}) {
    CAPTURE(to_string(p));
    Model model(w, target(), p);
    std::vector<float> logits = model.logits(g.prompt);
    std::size_t V = std::size_t(g.config.vocab_size), T = g.prompt.size();
    float lo = 1e30f, hi = -1e30f;
    double worst = 0;
    for (std::size_t v = 0; v < V; ++v) {
      lo = std::min(lo, g.last[v]);
      hi = std::max(hi, g.last[v]);
      worst = std::max(worst, double(std::abs(logits[(T - 1) * V + v] - g.last[v])));
    }
    // fp32: 1e-4 absolute; 16-bit: 2% of the logits' range.
    double bound = p == Precision::F32 ? 1e-4 : 2e-2 * double(hi - lo);
    MESSAGE(to_string(p) << ": max |logit - HF fp32| = " << worst << " (logits span " << hi - lo
                         << ", bound " << bound << ")");
    CHECK(worst <= bound);
    GenerateOptions go;
    go.max_new_tokens = int(g.greedy.size());
    go.stop_at_eot = false;
    auto out = model.generate({g.prompt}, go).at(0);
    // Identical up to the first step where HF's own top two logits are closer than the bound.
    std::size_t checked = 0;
    for (; checked < g.greedy.size(); ++checked) {
      if (p != Precision::F32 && g.gaps[checked] < bound)
        break;
      if (out[checked] != g.greedy[checked])
        break;
    }
    MESSAGE(to_string(p) << ": greedy tokens identical to HF for " << checked << " of "
                         << g.greedy.size());
    if (p == Precision::F32)
      CHECK(out == g.greedy);
    else
      CHECK((checked == g.greedy.size() || g.gaps[checked] < bound));
    // 300 steps cross attention length buckets (128 and 256 keys): with no
    // tuned decode attention every bucket runs the same kernels, and the
    // step is captured once.
    GenerateOptions longer = go;
    longer.max_new_tokens = 300;
    model.generate({g.prompt}, longer);
    CHECK(model.explain().decode_graph);
    CHECK(model.explain().graph_captures == 1);
  }
}

TEST_CASE("fp16 batches decode alike on the few-row, many-row and prefill products") {
  Golden g = readGolden(goldenDir() + "/124M_fp32.json");
  Weights w = Weights::random(g.config, g.seed);
  GenerateOptions go;
  go.max_new_tokens = int(g.greedy.size());
  go.stop_at_eot = false;
  // The last: each decode product bringing the next one's weight into L2
  // (batch 5 on the few-row kernels, batch 1 on the decode GEMVs).
  for (auto [few, fuse, prefetch] : {std::tuple{16, true, false}, std::tuple{16, false, false},
                                     std::tuple{0, true, false}, std::tuple{16, false, true}}) {
    CAPTURE(few);
    CAPTURE(fuse);
    CAPTURE(prefetch);
    ModelOptions mo;
    mo.max_batch = 5;
    mo.few_row_products = few;
    mo.many_row_products = few > 0 ? 64 : 0; // none: the prefill products
    mo.few_row_fusion = fuse;
    mo.prefetch_weights = prefetch;
    Model model(w, target(), Precision::F16, mo);
    // Five copies of the prompt: a decode step of 5 rows. Each follows HF's
    // greedy tokens up to the first step where HF's top two logits are
    // closer than fp16's error (as in the test above), and all five agree.
    float lo = *std::min_element(g.last.begin(), g.last.end());
    float hi = *std::max_element(g.last.begin(), g.last.end());
    double bound = 2e-2 * double(hi - lo);
    auto out = model.generate(std::vector<std::vector<int32_t>>(5, g.prompt), go);
    if (prefetch)
      out.push_back(model.generate({g.prompt}, go).at(0));
    bool listed = false, fusedQkv = false, plainQkv = false;
    for (const auto &k : model.explain().kernels) {
      listed = listed || k.role.ends_with("_few");
      fusedQkv = fusedQkv || k.role == "qkv_ln_few";
      plainQkv = plainQkv || k.role == "qkv_few"; // QKV and the cache write after a layernorm launch
    }
    CHECK(listed == (few > 0));
    CHECK(fusedQkv == (few > 0 && fuse));
    CHECK(plainQkv == (few > 0 && !fuse));
    for (std::size_t i = 0; i < out.size(); ++i) {
      const auto &seq = out[i];
      if (i < 5)
        CHECK(seq == out.front());
      std::size_t checked = 0;
      while (checked < g.greedy.size() && g.gaps[checked] >= bound && seq[checked] == g.greedy[checked])
        ++checked;
      MESSAGE("few_row_products " << few << std::string(fuse ? ", fused" : "") << ": greedy tokens identical to HF for " << checked << " of "
                                  << g.greedy.size());
      CHECK((checked == g.greedy.size() || g.gaps[checked] < bound));
    }
  }
  // A batch of 20 on the many-row products (ops::FewRowsLinear on 32 rows):
  // every sequence follows HF's greedy tokens as above.
  {
    ModelOptions mo;
    mo.max_batch = 20;
    Model model(w, target(), Precision::F16, mo);
    float lo = *std::min_element(g.last.begin(), g.last.end());
    float hi = *std::max_element(g.last.begin(), g.last.end());
    double bound = 2e-2 * double(hi - lo);
    auto out = model.generate(std::vector<std::vector<int32_t>>(20, g.prompt), go);
    bool many = false;
    for (const auto &k : model.explain().kernels)
      many = many || k.role.ends_with("_many");
    CHECK(many);
    for (const auto &seq : out) {
      CHECK(seq == out.front());
      std::size_t checked = 0;
      while (checked < g.greedy.size() && g.gaps[checked] >= bound && seq[checked] == g.greedy[checked])
        ++checked;
      CHECK((checked == g.greedy.size() || g.gaps[checked] < bound));
    }
  }
  ModelOptions bad;
  bad.few_row_products = 17;
  CHECK_THROWS_WITH_AS(Model(w, target(), Precision::F16, bad), "gpt2: few_row_products must be 0 to 16 (got 17)",
                       Error);
}

// The CPU backend runs fp32 only; the fused MLP is for 16-bit types.
TEST_CASE("fp16 decode steps of 1 and 2 sequences with each MLP in one launch follow HF's greedy tokens") {
  Golden g = readGolden(testData() + "/tiny_golden.json");
  Weights w = Weights::random(g.config, g.seed);
  GenerateOptions go;
  go.max_new_tokens = int(g.greedy.size());
  go.stop_at_eot = false;
  // As the GPU tests check fp16: identical up to the first step where HF's
  // top two logits are closer than fp16's error.
  float lo = *std::min_element(g.last.begin(), g.last.end());
  float hi = *std::max_element(g.last.begin(), g.last.end());
  double bound = 2e-2 * double(hi - lo);
  for (int fused : {2, 0}) {
    CAPTURE(fused);
    ModelOptions mo;
    mo.max_batch = 2;
    mo.decode_kernel_rows = 2;
    mo.fused_mlp_rows = fused;
    Model model(w, target(), Precision::F16, mo);
    auto has = [&](const std::string &role) {
      const auto &ks = model.explain().kernels;
      return std::any_of(ks.begin(), ks.end(), [&](const auto &k) { return k.role == role; });
    };
    CHECK(has("mlp_decode1") == (fused > 0));
    CHECK(has("mlp_decode2") == (fused > 0));
    auto out = model.generate({g.prompt, g.prompt}, go);
    out.push_back(model.generate({g.prompt}, go).at(0));
    for (const auto &seq : out) {
      std::size_t checked = 0;
      while (checked < g.greedy.size() && g.gaps[checked] >= bound && seq[checked] == g.greedy[checked])
        ++checked;
      MESSAGE("fused_mlp_rows " << fused << ": greedy tokens identical to HF for " << checked << " of "
                                << g.greedy.size());
      CHECK((checked == g.greedy.size() || g.gaps[checked] < bound));
    }
  }
}

TEST_CASE("a long fp16 prefill agrees with a short one on their common rows") {
  Golden g = readGolden(goldenDir() + "/124M_fp32.json");
  Weights w = Weights::random(g.config, g.seed);
  Model model(w, target(), Precision::F16);
  std::vector<int32_t> prompt;
  for (int t = 0; t < 900; ++t)
    prompt.push_back(int32_t((t * 7919) % 50000));
  std::vector<float> all = model.logits(prompt);
  const std::size_t rows = 100, V = std::size_t(g.config.vocab_size);
  std::vector<float> part = model.logits(std::vector<int32_t>(prompt.begin(), prompt.begin() + rows));
  double worst = 0, span = 0;
  for (std::size_t i = 0; i < rows * V; ++i) {
    worst = std::max(worst, double(std::abs(all[i] - part[i])));
    span = std::max(span, double(std::abs(part[i])));
  }
  MESSAGE("900-token prefill vs 100-token prefill, rows 0-99: max |difference| = " << worst
          << " (largest |logit| " << span << ")");
  CHECK(worst <= 2e-2 * span);
}
TEST_SUITE_END();
