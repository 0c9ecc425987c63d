//===- Weights.cpp - GPT-2 configs, parameters and their file formats ------===//
#include "kiln/gpt2/weights.hpp"

#include "Json.h"
#include "Parallel.h"
#include "kiln/runtime/kernel.hpp"

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
  int64_t C = n_embd;
  int64_t perLayer =
      4 * C + (C * 3 * C + 3 * C) + (C * C + C) + (C * 4 * C + 4 * C) + (4 * C * C + C);
  return int64_t(vocab_size) * C + int64_t(n_ctx) * C + n_layer * perLayer + 2 * C;
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

std::string readAll(const std::string &path, const std::string &what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("gpt2: cannot open " + what + " " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int asInt(const json::Value &v, const std::string &key, const std::string &path) {
  if (v.kind != json::Value::Kind::Number || v.number != double(int64_t(v.number)))
    throw Error("gpt2: " + path + ": '" + key + "' must be an integer");
  return int(v.number);
}

} // namespace

Config read_hf_config(const std::string &path) {
  json::Value root = json::parse(readAll(path, "config"), path);
  if (root.kind != json::Value::Kind::Object)
    throw Error("gpt2: " + path + ": expected a JSON object");
  Config c;
  auto get = [&](std::initializer_list<const char *> keys, int &out, bool required) {
    for (const char *k : keys)
      if (const json::Value *v = root.find(k)) {
        out = asInt(*v, k, path);
        return;
      }
    if (required)
      throw Error("gpt2: " + path + ": missing '" + *keys.begin() + "'");
  };
  get({"n_layer", "num_hidden_layers"}, c.n_layer, true);
  get({"n_head", "num_attention_heads"}, c.n_head, true);
  get({"n_embd", "hidden_size"}, c.n_embd, true);
  get({"vocab_size"}, c.vocab_size, true);
  get({"n_positions", "n_ctx", "max_position_embeddings"}, c.n_ctx, true);
  c.validate();
  return c;
}

//===----------------------------------------------------------------------===//
// safetensors
//===----------------------------------------------------------------------===//

Weights Weights::from_safetensors(const std::string &path, const Config &config) {
  Weights w;
  shapeFor(w, config);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("gpt2: cannot open weights " + path);
  in.seekg(0, std::ios::end);
  auto fileSize = uint64_t(in.tellg());
  in.seekg(0);
  uint64_t headerSize = 0;
  if (fileSize < 8 || !in.read(reinterpret_cast<char *>(&headerSize), 8) ||
      headerSize > fileSize - 8)
    throw Error("gpt2: " + path + " is not a safetensors file (bad header length)");
  std::string header(headerSize, '\0');
  in.read(header.data(), std::streamsize(headerSize));
  json::Value root = json::parse(header, path + " (safetensors header)");
  if (root.kind != json::Value::Kind::Object)
    throw Error("gpt2: " + path + ": the safetensors header is not a JSON object");
  uint64_t dataStart = 8 + headerSize, dataSize = fileSize - dataStart;

  std::map<std::string, Tensor *> wanted;
  for (auto &[name, t] : w.named())
    wanted[name] = t;
  std::map<std::string, bool> seen;
  for (auto &[rawName, info] : root.object) {
    if (rawName == "__metadata__")
      continue;
    std::string name = rawName.rfind("transformer.", 0) == 0 ? rawName.substr(12) : rawName;
    auto it = wanted.find(name);
    if (it == wanted.end()) {
      // Buffers and the tied head that HF files may carry.
      bool known = name == "lm_head.weight" || name.ends_with(".attn.bias") ||
                   name.ends_with(".attn.masked_bias");
      if (known)
        continue;
      throw Error("gpt2: " + path + ": unexpected tensor '" + rawName +
                  "' (not part of GPT-2 with " + std::to_string(config.n_layer) + " layers)");
    }
    Tensor &t = *it->second;
    const json::Value *dtype = info.find("dtype"), *shape = info.find("shape"),
                      *offs = info.find("data_offsets");
    if (!dtype || !shape || !offs || offs->array.size() != 2)
      throw Error("gpt2: " + path + ": tensor '" + rawName +
                  "' lacks dtype, shape or data_offsets");
    std::vector<int64_t> dims;
    for (const json::Value &d : shape->array)
      dims.push_back(int64_t(d.number));
    if (dims != t.shape)
      throw Error("gpt2: " + path + ": tensor '" + rawName + "' has shape " + shapeStr(dims) +
                  ", expected " + shapeStr(t.shape) + " for " + config.describe());
    int width = dtype->string == "F32"                                ? 4
                : (dtype->string == "F16" || dtype->string == "BF16") ? 2
                                                                      : 0;
    if (!width)
      throw Error("gpt2: " + path + ": tensor '" + rawName + "' has dtype " + dtype->string +
                  "; supported: F32, F16, BF16");
    auto begin = uint64_t(offs->array[0].number), end = uint64_t(offs->array[1].number);
    if (end < begin || end > dataSize || end - begin != uint64_t(t.numel()) * uint64_t(width))
      throw Error("gpt2: " + path + ": tensor '" + rawName + "' has data offsets [" +
                  std::to_string(begin) + ", " + std::to_string(end) +
                  ") that do not fit its shape and dtype " + "or the file (truncated?)");
    std::string raw(end - begin, '\0');
    in.seekg(std::streamoff(dataStart + begin));
    if (!in.read(raw.data(), std::streamsize(raw.size())))
      throw Error("gpt2: " + path + ": cannot read tensor '" + rawName + "' (truncated file?)");
    t.data.resize(std::size_t(t.numel()));
    for (std::size_t k = 0; k < t.data.size(); ++k) {
      if (width == 4) {
        std::memcpy(&t.data[k], raw.data() + 4 * k, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, raw.data() + 2 * k, 2);
        t.data[k] = dtype->string == "F16" ? fromHalf(h) : fromBf16(h);
      }
    }
    seen[name] = true;
  }
  for (auto &[name, t] : wanted)
    if (!seen.count(name))
      throw Error("gpt2: " + path + ": missing tensor '" + name + "'");
  return w;
}

Weights Weights::from_hf_dir(const std::string &dir) {
  fs::path d(dir);
  if (!fs::is_directory(d))
    throw Error("gpt2: model directory " + dir + " does not exist");
  fs::path config = d / "config.json", model = d / "model.safetensors";
  if (!fs::exists(config))
    throw Error("gpt2: " + dir + " has no config.json");
  if (!fs::exists(model))
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
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("gpt2: cannot open llm.c checkpoint " + path);
  int32_t h[256];
  if (!in.read(reinterpret_cast<char *>(h), sizeof h))
    throw Error("gpt2: " + path + ": shorter than an llm.c header");
  if (h[0] != 20240326)
    throw Error("gpt2: " + path + ": bad magic " + std::to_string(h[0]) +
                " (not an llm.c GPT-2 checkpoint)");
  if (h[1] != 3 && h[1] != 5)
    throw Error("gpt2: " + path + ": llm.c version " + std::to_string(h[1]) +
                " (supported: 3 fp32, 5 bf16)");
  Config c;
  c.n_ctx = h[2], c.vocab_size = h[3], c.n_layer = h[4], c.n_head = h[5], c.n_embd = h[6];
  int64_t Vp = h[7] > 0 ? h[7] : c.vocab_size, C = c.n_embd, L = c.n_layer, T = c.n_ctx;
  Weights w;
  shapeFor(w, c);
  bool bf16 = h[1] == 5;
  auto read = [&](int64_t n, const char *what) {
    std::vector<float> v(static_cast<std::size_t>(n));
    if (bf16) {
      std::vector<uint16_t> raw(static_cast<std::size_t>(n));
      if (!in.read(reinterpret_cast<char *>(raw.data()), std::streamsize(n * 2)))
        throw Error(std::string("gpt2: ") + path + ": truncated while reading " + what);
      for (std::size_t i = 0; i < v.size(); ++i)
        v[i] = fromBf16(raw[i]);
    } else if (!in.read(reinterpret_cast<char *>(v.data()), std::streamsize(n * 4))) {
      throw Error(std::string("gpt2: ") + path + ": truncated while reading " + what);
    }
    return v;
  };
  // llm.c stores projections as [out, in]; transpose into Conv1D's [in, out].
  auto transposed = [](const float *src, int64_t out, int64_t inDim) {
    std::vector<float> t(std::size_t(out * inDim));
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < inDim; ++i)
        t[std::size_t(i * out + o)] = src[o * inDim + i];
    return t;
  };
  auto wte = read(Vp * C, "wte");
  w.wte.data.assign(wte.begin(), wte.begin() + c.vocab_size * C);
  w.wpe.data = read(T * C, "wpe");
  auto perLayer = [&](int64_t n, const char *what) { return read(L * n, what); };
  auto ln1w = perLayer(C, "ln1w"), ln1b = perLayer(C, "ln1b");
  auto qkvw = perLayer(3 * C * C, "qkvw"), qkvb = perLayer(3 * C, "qkvb");
  auto projw = perLayer(C * C, "attprojw"), projb = perLayer(C, "attprojb");
  auto ln2w = perLayer(C, "ln2w"), ln2b = perLayer(C, "ln2b");
  auto fcw = perLayer(4 * C * C, "fcw"), fcb = perLayer(4 * C, "fcb");
  auto fcpw = perLayer(4 * C * C, "fcprojw"), fcpb = perLayer(C, "fcprojb");
  w.ln_f_w.data = read(C, "lnfw");
  w.ln_f_b.data = read(C, "lnfb");
  auto slice = [](const std::vector<float> &v, int64_t l, int64_t n) {
    return std::vector<float>(v.begin() + l * n, v.begin() + (l + 1) * n);
  };
  for (int64_t l = 0; l < L; ++l) {
    LayerWeights &lw = w.layers[std::size_t(l)];
    lw.ln_1_w.data = slice(ln1w, l, C);
    lw.ln_1_b.data = slice(ln1b, l, C);
    lw.c_attn_w.data = transposed(qkvw.data() + l * 3 * C * C, 3 * C, C);
    lw.c_attn_b.data = slice(qkvb, l, 3 * C);
    lw.c_proj_w.data = transposed(projw.data() + l * C * C, C, C);
    lw.c_proj_b.data = slice(projb, l, C);
    lw.ln_2_w.data = slice(ln2w, l, C);
    lw.ln_2_b.data = slice(ln2b, l, C);
    lw.c_fc_w.data = transposed(fcw.data() + l * 4 * C * C, 4 * C, C);
    lw.c_fc_b.data = slice(fcb, l, 4 * C);
    lw.mlp_proj_w.data = transposed(fcpw.data() + l * 4 * C * C, C, 4 * C);
    lw.mlp_proj_b.data = slice(fcpb, l, C);
  }
  return w;
}

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
