//===- Weights.cpp - GPT-2 configs, parameters and their file formats ------===//
#include "kiln/gpt2/weights.hpp"

#include "File.h"
#include "Json.h"
#include "Memory.h"
#include "Parallel.h"
#include "kiln/core/error.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace kiln::gpt2 {
namespace fs = std::filesystem;

//===----------------------------------------------------------------------===//
// Config
//===----------------------------------------------------------------------===//

int64_t Config::num_params() const {
  // In 128 bits: describe() runs on configs that validate() is about to reject.
  using i128 = __int128;
  i128 C = n_embd;
  i128 perLayer = 4 * C + (C * 3 * C + 3 * C) + (C * C + C) + (C * 4 * C + 4 * C) + (4 * C * C + C);
  i128 n = i128(vocab_size) * C + i128(n_ctx) * C + i128(n_layer) * perLayer + 2 * C;
  return n > i128(INT64_MAX) ? INT64_MAX : int64_t(n);
}

std::string Config::describe() const {
  std::ostringstream s;
  s << n_layer << " layers, " << n_head << " heads, " << n_embd << " wide, vocab " << vocab_size
    << ", context " << n_ctx << " (" << num_params() / 1e6 << "M parameters)";
  return s.str();
}

Config Config::preset(const std::string &name) {
  Config c;
  if (name == "124M") {
    c.n_layer = 12, c.n_head = 12, c.n_embd = 768;
  } else if (name == "355M") {
    c.n_layer = 24, c.n_head = 16, c.n_embd = 1024;
  } else if (name == "774M") {
    c.n_layer = 36, c.n_head = 20, c.n_embd = 1280;
  } else if (name == "1.5B") {
    c.n_layer = 48, c.n_head = 25, c.n_embd = 1600;
  } else {
    throw Error("gpt2: unknown model size '" + name + "' (known: 124M, 355M, 774M, 1.5B)");
  }
  return c;
}

void Config::validate() const {
  auto bad = [&](const std::string &what) {
    throw Error("gpt2: unusable config (" + what + "): " + describe());
  };
  if (n_layer < 1 || n_head < 1 || n_embd < 1 || vocab_size < 1 || n_ctx < 1)
    bad("every size must be positive");
  if (n_layer > kMaxLayers || n_embd > kMaxEmbd || vocab_size > kMaxVocab || n_ctx > kMaxCtx)
    bad("at most " + std::to_string(kMaxLayers) + " layers, " + std::to_string(kMaxEmbd) +
        " wide, a vocabulary of " + std::to_string(kMaxVocab) + " and a context of " +
        std::to_string(kMaxCtx));
  if (n_embd % n_head != 0)
    bad("n_embd must be a multiple of n_head");
  int d = head_dim();
  if (d != 16 && d != 32 && d != 64 && d != 128)
    bad("head size " + std::to_string(d) + " is not 16, 32, 64 or 128");
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

//===----------------------------------------------------------------------===//
// Names and shapes
//===----------------------------------------------------------------------===//

std::vector<std::pair<std::string, Tensor *>> Weights::named() {
  std::vector<std::pair<std::string, Tensor *>> out{{"wte.weight", &wte}, {"wpe.weight", &wpe}};
  for (std::size_t i = 0; i < layers.size(); ++i) {
    std::string p = "h." + std::to_string(i) + ".";
    LayerWeights &l = layers[i];
    for (auto [n, t] : std::initializer_list<std::pair<const char *, Tensor *>>{
             {"ln_1.weight", &l.ln_1_w},
             {"ln_1.bias", &l.ln_1_b},
             {"attn.c_attn.weight", &l.c_attn_w},
             {"attn.c_attn.bias", &l.c_attn_b},
             {"attn.c_proj.weight", &l.c_proj_w},
             {"attn.c_proj.bias", &l.c_proj_b},
             {"ln_2.weight", &l.ln_2_w},
             {"ln_2.bias", &l.ln_2_b},
             {"mlp.c_fc.weight", &l.c_fc_w},
             {"mlp.c_fc.bias", &l.c_fc_b},
             {"mlp.c_proj.weight", &l.mlp_proj_w},
             {"mlp.c_proj.bias", &l.mlp_proj_b}})
      out.emplace_back(p + n, t);
  }
  out.emplace_back("ln_f.weight", &ln_f_w);
  out.emplace_back("ln_f.bias", &ln_f_b);
  return out;
}

namespace {

/// Sizes every tensor of `w` for `c` (data left empty).
void shapeFor(Weights &w, const Config &c) {
  c.validate();
  int64_t C = c.n_embd;
  w.config = c;
  w.layers.assign(std::size_t(c.n_layer), {});
  w.wte.shape = {c.vocab_size, C};
  w.wpe.shape = {c.n_ctx, C};
  for (LayerWeights &l : w.layers) {
    l.ln_1_w.shape = l.ln_1_b.shape = l.ln_2_w.shape = l.ln_2_b.shape = {C};
    l.c_attn_w.shape = {C, 3 * C};
    l.c_attn_b.shape = {3 * C};
    l.c_proj_w.shape = {C, C};
    l.c_proj_b.shape = {C};
    l.c_fc_w.shape = {C, 4 * C};
    l.c_fc_b.shape = {4 * C};
    l.mlp_proj_w.shape = {4 * C, C};
    l.mlp_proj_b.shape = {C};
  }
  w.ln_f_w.shape = w.ln_f_b.shape = {C};
}

std::string shapeStr(const std::vector<int64_t> &s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

float fromHalf(uint16_t h) {
  uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else { // subnormal
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while (!(man & 0x400));
      bits = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3FF) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000 | man << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  return std::bit_cast<float>(bits);
}
float fromBf16(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

/// The byte width of a safetensors dtype; 0 for an unknown one.
int dtypeWidth(const std::string &dtype) {
  static const std::map<std::string, int, std::less<>> widths = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2},
      {"U16", 2},  {"F16", 2}, {"BF16", 2}, {"I32", 4},    {"U32", 4},     {"F32", 4},
      {"I64", 8},  {"U64", 8}, {"F64", 8}};
  auto it = widths.find(dtype);
  return it == widths.end() ? 0 : it->second;
}

/// Every parameter must be finite: a NaN or an infinity would turn every
/// logit into NaN, and argmax would then answer token 0 forever.
void requireFinite(Weights &w, const std::string &path) {
  for (auto &[name, t] : w.named()) {
    std::atomic<int64_t> first{INT64_MAX};
    const float *d = t->data.data();
    parallelFor(int64_t(t->data.size()), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        if (!std::isfinite(d[i])) {
          int64_t seen = first.load();
          while (i < seen && !first.compare_exchange_weak(seen, i)) {
          }
          return;
        }
    });
    if (int64_t i = first.load(); i != INT64_MAX)
      throw Error("gpt2: " + path + ": tensor '" + name + "' holds " +
                  (std::isnan(d[i]) ? "NaN" : "an infinity") + " at element " +
                  std::to_string(i) + " (a damaged or diverged checkpoint)");
  }
}

Weights readSafetensors(const File &in, const Config &config);
Weights readLlmc(const File &in);

} // namespace

Config read_hf_config(const std::string &path) {
  return parse_hf_config(readRegularFile(path, "config", 16 << 20), path);
}

Config parse_hf_config(const std::string &text, const std::string &path) {
  json::Value root = json::parse(text, "gpt2: " + path);
  if (!root.is_object())
    throw Error("gpt2: " + path + ": expected a JSON object");
  Config c;
  auto get = [&](std::initializer_list<const char *> keys, int &out, int max) {
    for (const char *k : keys)
      if (auto v = root.find(k); v != root.end()) {
        out = int(json::integer(*v, "gpt2: " + path + ": '" + std::string(k) + "'", 1, max));
        return;
      }
    throw Error("gpt2: " + path + ": missing '" + *keys.begin() + "'");
  };
  get({"n_layer", "num_hidden_layers"}, c.n_layer, Config::kMaxLayers);
  get({"n_head", "num_attention_heads"}, c.n_head, Config::kMaxEmbd);
  get({"n_embd", "hidden_size"}, c.n_embd, Config::kMaxEmbd);
  get({"vocab_size"}, c.vocab_size, Config::kMaxVocab);
  get({"n_positions", "n_ctx", "max_position_embeddings"}, c.n_ctx, Config::kMaxCtx);
  c.validate();
  return c;
}

//===----------------------------------------------------------------------===//
// safetensors
//===----------------------------------------------------------------------===//

Weights Weights::from_safetensors(const std::string &path, const Config &config) {
  return readSafetensors(File(path, "weights"), config);
}

Weights Weights::from_safetensors_bytes(std::string_view bytes, const Config &config,
                                        const std::string &name) {
  return readSafetensors(File::memory(bytes, name, "weights"), config);
}

namespace {
Weights readSafetensors(const File &in, const Config &config) {
  const std::string &path = in.path();
  Weights w;
  shapeFor(w, config);
  const uint64_t fileSize = in.size();
  auto notSafetensors = [&](const std::string &why) {
    return Error("gpt2: " + path + " is not a safetensors file (" + why + ")");
  };
  // The layout: an 8-byte little-endian header length N, N bytes of JSON
  // (padded with spaces), then the tensors' bytes, which the header's
  // data_offsets must cover exactly: contiguous, from 0 to the end of the
  // file. That cover is what catches a header length a few bytes off.
  uint64_t headerSize = 0;
  if (fileSize < 8)
    throw notSafetensors("shorter than its 8-byte header length");
  in.read(0, &headerSize, 8);
  constexpr uint64_t kMaxHeader = 100 << 20; // the format's own limit
  if (headerSize < 2 || headerSize > kMaxHeader || headerSize > fileSize - 8)
    throw notSafetensors("header length " + std::to_string(headerSize) + " in a file of " +
                         std::to_string(fileSize) + " bytes");
  std::string header(headerSize, '\0');
  in.read(8, header.data(), headerSize);
  if (header.front() != '{')
    throw notSafetensors("the header does not start with '{'");
  json::Value root = json::parse(header, "gpt2: " + path + " (safetensors header)");
  if (!root.is_object())
    throw notSafetensors("the header is not a JSON object");
  const uint64_t dataStart = 8 + headerSize, dataSize = fileSize - dataStart;

  struct Entry {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (auto &[name, info] : root.items()) {
    if (name == "__metadata__") {
      if (!info.is_object())
        throw notSafetensors("__metadata__ is not an object");
      continue;
    }
    std::string where = "gpt2: " + path + ": tensor '" + name + "'";
    if (!info.is_object() || info.size() != 3 || !info.contains("dtype") ||
        !info.contains("shape") || !info.contains("data_offsets"))
      throw Error(where + " must be an object of exactly dtype, shape and data_offsets");
    const json::Value &dtype = info["dtype"], &shape = info["shape"], &offs = info["data_offsets"];
    if (!dtype.is_string() || !dtypeWidth(dtype.get<std::string>()))
      throw Error(where + " has dtype " + dtype.dump() +
                  ", which is not a safetensors dtype (F32, F16, BF16, ...)");
    if (!shape.is_array() || shape.size() > 8)
      throw Error(where + ": shape must be an array of at most 8 sizes");
    if (!offs.is_array() || offs.size() != 2)
      throw Error(where + ": data_offsets must be an array [begin, end]");
    Entry e{name, dtype.get<std::string>(), {}, 0, 0};
    uint64_t bytes = uint64_t(dtypeWidth(e.dtype));
    for (const json::Value &d : shape) {
      e.shape.push_back(json::integer(d, where + ": a size in its shape", 0, INT32_MAX));
      bytes = mulSat(bytes, uint64_t(e.shape.back()));
    }
    e.begin = uint64_t(json::integer(offs[0], where + ": data_offsets[0]"));
    e.end = uint64_t(json::integer(offs[1], where + ": data_offsets[1]"));
    if (e.end < e.begin || e.end - e.begin != bytes)
      throw Error(where + " has data offsets [" + std::to_string(e.begin) + ", " +
                  std::to_string(e.end) + "), which do not hold its shape " + shapeStr(e.shape) +
                  " of " + e.dtype);
    entries.push_back(std::move(e));
  }
  // The tensors' bytes, in offset order, must tile the data exactly.
  std::vector<const Entry *> byOffset;
  for (const Entry &e : entries)
    byOffset.push_back(&e);
  std::sort(byOffset.begin(), byOffset.end(), [](const Entry *a, const Entry *b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  for (const Entry *e : byOffset) {
    if (e->begin != covered)
      throw notSafetensors("tensor '" + e->name + "' starts at byte " + std::to_string(e->begin) +
                           " of the data, where " +
                           (e->begin < covered ? "another tensor's bytes are"
                                               : "nothing has ended (a gap)") +
                           " (expected " + std::to_string(covered) + ")");
    covered = e->end;
  }
  if (covered != dataSize)
    throw notSafetensors("the tensors hold " + std::to_string(covered) + " bytes but " +
                         std::to_string(dataSize) +
                         " follow the header (a wrong header length, or a truncated or "
                         "extended file)");

  requireHostMemory(mulSat(uint64_t(config.num_params()), 4), "loading " + path);
  std::map<std::string, Tensor *> wanted;
  for (auto &[name, t] : w.named())
    wanted[name] = t;
  std::map<std::string, std::string> seen; // GPT-2 name -> name in the file
  std::string raw;
  for (const Entry &e : entries) {
    std::string name = e.name.rfind("transformer.", 0) == 0 ? e.name.substr(12) : e.name;
    auto it = wanted.find(name);
    if (it == wanted.end()) {
      // Buffers and the tied head that HF files may carry.
      bool known = name == "lm_head.weight" || name.ends_with(".attn.bias") ||
                   name.ends_with(".attn.masked_bias");
      if (known)
        continue;
      throw Error("gpt2: " + path + ": unexpected tensor '" + e.name +
                  "' (not part of GPT-2 with " + std::to_string(config.n_layer) + " layers)");
    }
    if (auto [at, fresh] = seen.emplace(name, e.name); !fresh)
      throw Error("gpt2: " + path + ": tensors '" + at->second + "' and '" + e.name +
                  "' are the same parameter");
    Tensor &t = *it->second;
    if (e.shape != t.shape)
      throw Error("gpt2: " + path + ": tensor '" + e.name + "' has shape " + shapeStr(e.shape) +
                  ", expected " + shapeStr(t.shape) + " for " + config.describe());
    if (e.dtype != "F32" && e.dtype != "F16" && e.dtype != "BF16")
      throw Error("gpt2: " + path + ": tensor '" + e.name + "' has dtype " + e.dtype +
                  "; supported: F32, F16, BF16");
    raw.resize(e.end - e.begin);
    in.read(dataStart + e.begin, raw.data(), raw.size());
    t.data.resize(std::size_t(t.numel()));
    for (std::size_t k = 0; k < t.data.size(); ++k) {
      if (e.dtype == "F32") {
        std::memcpy(&t.data[k], raw.data() + 4 * k, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, raw.data() + 2 * k, 2);
        t.data[k] = e.dtype == "F16" ? fromHalf(h) : fromBf16(h);
      }
    }
  }
  for (auto &[name, t] : wanted)
    if (!seen.count(name))
      throw Error("gpt2: " + path + ": missing tensor '" + name + "'");
  requireFinite(w, path);
  return w;
}
} // namespace

Weights Weights::from_hf_dir(const std::string &dir) {
  // Whether a path is there; a loop of links or a folder that cannot be
  // searched is an error of its own, not "missing".
  auto status = [](const fs::path &p) {
    std::error_code ec;
    fs::file_status st = fs::status(p, ec);
    if (ec && ec != std::errc::no_such_file_or_directory)
      throw Error("gpt2: " + p.string() + ": " + ec.message());
    return st;
  };
  fs::path d(dir);
  fs::file_status st = status(d);
  if (!fs::exists(st))
    throw Error("gpt2: model directory " + dir + " does not exist");
  if (!fs::is_directory(st))
    throw Error("gpt2: --model expects a directory (config.json, model.safetensors); " + dir +
                " is not one");
  fs::path config = d / "config.json", model = d / "model.safetensors";
  if (!fs::exists(status(config)))
    throw Error("gpt2: " + dir + " has no config.json");
  if (!fs::exists(status(model)))
    throw Error("gpt2: " + dir + " has no model.safetensors");
  return from_safetensors(model.string(), read_hf_config(config.string()));
}

void Weights::save_hf_dir(const std::string &dir) {
  fs::create_directories(dir);
  std::string header = "{";
  uint64_t offset = 0;
  auto all = named();
  for (std::size_t i = 0; i < all.size(); ++i) {
    auto &[name, t] = all[i];
    uint64_t bytes = uint64_t(t->numel()) * 4;
    header += (i ? "," : "") + std::string("\"") + name +
              "\":{\"dtype\":\"F32\",\"shape\":" + shapeStr(t->shape) + ",\"data_offsets\":[" +
              std::to_string(offset) + "," + std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  header += "}";
  while ((header.size() + 8) % 8)
    header += ' ';
  std::ofstream out(fs::path(dir) / "model.safetensors", std::ios::binary);
  uint64_t n = header.size();
  out.write(reinterpret_cast<const char *>(&n), 8);
  out << header;
  for (auto &[name, t] : all)
    out.write(reinterpret_cast<const char *>(t->data.data()), std::streamsize(t->data.size() * 4));
  const Config &c = config;
  std::ofstream(fs::path(dir) / "config.json")
      << "{\"model_type\": \"gpt2\", \"architectures\": [\"GPT2LMHeadModel\"], \"n_layer\": "
      << c.n_layer << ", \"n_head\": " << c.n_head << ", \"n_embd\": " << c.n_embd
      << ", \"vocab_size\": " << c.vocab_size << ", \"n_positions\": " << c.n_ctx
      << ", \"n_ctx\": " << c.n_ctx
      << ", \"layer_norm_epsilon\": 1e-05, \"activation_function\": \"gelu_new\", "
         "\"bos_token_id\": "
      << c.vocab_size - 1 << ", \"eos_token_id\": " << c.vocab_size - 1 << "}\n";
}

//===----------------------------------------------------------------------===//
// llm.c checkpoints
//===----------------------------------------------------------------------===//

Weights Weights::from_llmc(const std::string &path) {
  return readLlmc(File(path, "llm.c checkpoint"));
}

Weights Weights::from_llmc_bytes(std::string_view bytes, const std::string &name) {
  return readLlmc(File::memory(bytes, name, "llm.c checkpoint"));
}

namespace {
Weights readLlmc(const File &in) {
  const std::string &path = in.path();
  int32_t h[256];
  if (in.size() < sizeof h)
    throw Error("gpt2: " + path + ": shorter than an llm.c header (1024 bytes)");
  in.read(0, h, sizeof h);
  if (h[0] != 20240326)
    throw Error("gpt2: " + path + ": bad magic " + std::to_string(h[0]) +
                " (not an llm.c GPT-2 checkpoint)");
  if (h[1] != 3 && h[1] != 5)
    throw Error("gpt2: " + path + ": llm.c version " + std::to_string(h[1]) +
                " (supported: 3 fp32, 5 bf16)");
  Config c;
  c.n_ctx = h[2], c.vocab_size = h[3], c.n_layer = h[4], c.n_head = h[5], c.n_embd = h[6];
  c.validate();
  // The padded vocabulary (rows of wte in the file): at least the real one.
  if (h[7] != 0 && (h[7] < c.vocab_size || h[7] > Config::kMaxVocab))
    throw Error("gpt2: " + path + ": padded vocabulary " + std::to_string(h[7]) +
                " is smaller than the vocabulary " + std::to_string(c.vocab_size) +
                " or larger than " + std::to_string(Config::kMaxVocab));
  const uint64_t Vp = h[7] > 0 ? uint64_t(h[7]) : uint64_t(c.vocab_size), C = uint64_t(c.n_embd),
                 L = uint64_t(c.n_layer), T = uint64_t(c.n_ctx);
  const bool bf16 = h[1] == 5;
  const uint64_t width = bf16 ? 2 : 4;
  // Sizes are within Config's limits: these products fit in 64 bits.
  const uint64_t params = Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
  if (in.size() != sizeof h + params * width)
    throw Error("gpt2: " + path + ": the file has " + std::to_string(in.size() - sizeof h) +
                " bytes of parameters, but a version-" + std::to_string(h[1]) + " checkpoint of " +
                c.describe() + " (padded vocabulary " + std::to_string(Vp) + ") has " +
                std::to_string(params * width) + " (truncated, or a header that does not match)");
  // The host copy, plus one parameter kind (4C*C per layer at most) in flight.
  requireHostMemory(4 * (params + L * 4 * C * C * 2), "loading " + path);
  Weights w;
  shapeFor(w, c);
  uint64_t at = sizeof h;
  std::vector<float> v;
  auto read = [&](uint64_t n) {
    v.resize(n);
    if (bf16) {
      std::vector<uint16_t> raw(n);
      in.read(at, raw.data(), n * 2);
      for (uint64_t i = 0; i < n; ++i)
        v[i] = fromBf16(raw[i]);
    } else {
      in.read(at, v.data(), n * 4);
    }
    at += n * width;
    return v.data();
  };
  // Per-layer kinds follow each other ([L, n] each); llm.c stores projections
  // as [out, in]: transpose into Conv1D's [in, out].
  auto perLayer = [&](uint64_t n, Tensor LayerWeights::*field) {
    const float *src = read(L * n);
    for (uint64_t l = 0; l < L; ++l)
      (w.layers[l].*field).data.assign(src + l * n, src + (l + 1) * n);
  };
  auto perLayerT = [&](uint64_t out, uint64_t inDim, Tensor LayerWeights::*field) {
    const float *src = read(L * out * inDim);
    for (uint64_t l = 0; l < L; ++l) {
      std::vector<float> &t = (w.layers[l].*field).data;
      const float *s = src + l * out * inDim;
      t.resize(out * inDim);
      for (uint64_t o = 0; o < out; ++o)
        for (uint64_t i = 0; i < inDim; ++i)
          t[i * out + o] = s[o * inDim + i];
    }
  };
  const float *wte = read(Vp * C);
  w.wte.data.assign(wte, wte + uint64_t(c.vocab_size) * C);
  const float *wpe = read(T * C);
  w.wpe.data.assign(wpe, wpe + T * C);
  perLayer(C, &LayerWeights::ln_1_w);
  perLayer(C, &LayerWeights::ln_1_b);
  perLayerT(3 * C, C, &LayerWeights::c_attn_w);
  perLayer(3 * C, &LayerWeights::c_attn_b);
  perLayerT(C, C, &LayerWeights::c_proj_w);
  perLayer(C, &LayerWeights::c_proj_b);
  perLayer(C, &LayerWeights::ln_2_w);
  perLayer(C, &LayerWeights::ln_2_b);
  perLayerT(4 * C, C, &LayerWeights::c_fc_w);
  perLayer(4 * C, &LayerWeights::c_fc_b);
  perLayerT(C, 4 * C, &LayerWeights::mlp_proj_w);
  perLayer(C, &LayerWeights::mlp_proj_b);
  const float *lnfw = read(C);
  w.ln_f_w.data.assign(lnfw, lnfw + C);
  const float *lnfb = read(C);
  w.ln_f_b.data.assign(lnfb, lnfb + C);
  requireFinite(w, path);
  return w;
}
} // namespace

//===----------------------------------------------------------------------===//
// Seeded weights
//===----------------------------------------------------------------------===//

namespace {
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
} // namespace

Weights Weights::random(const Config &config, uint64_t seed) {
  Weights w;
  shapeFor(w, config);
  requireHostMemory(mulSat(uint64_t(config.num_params()), 4), "the seeded model");
  // Element i overall (1-based, across tensors in named() order) is
  // lo + (hi - lo) * u, u = the top 24 bits of mix(seed + i * golden) / 2^24,
  // computed in double and stored as float: independent of the others, so
  // tensors are filled in parallel.
  double C = config.n_embd;
  uint64_t counter = 0;
  for (auto &[name, t] : w.named()) {
    double lo, hi;
    if (name == "wte.weight")
      lo = -0.5, hi = 0.5;
    else if (name == "wpe.weight")
      lo = -0.1, hi = 0.1;
    else if (name.ends_with("ln_1.weight") || name.ends_with("ln_2.weight") ||
             name == "ln_f.weight")
      lo = 0.9, hi = 1.1;
    else if (name.ends_with(".bias"))
      lo = -0.1, hi = 0.1;
    else { // projections: keep activations O(1)
      double a = 1.0 / std::sqrt(name.ends_with("mlp.c_proj.weight") ? 4 * C : C);
      lo = -a, hi = a;
    }
    t->data.resize(std::size_t(t->numel()));
    uint64_t base = counter;
    float *out = t->data.data();
    parallelFor(t->numel(), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        uint64_t k = base + uint64_t(i) + 1;
        double u = double(mix(seed + k * 0x9E3779B97F4A7C15ull) >> 40) * (1.0 / 16777216.0);
        out[i] = float(lo + (hi - lo) * u);
      }
    });
    counter += uint64_t(t->numel());
  }
  return w;
}

} // namespace kiln::gpt2
