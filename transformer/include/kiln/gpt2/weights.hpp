//===- weights.hpp - GPT-2 parameters on the host, and their file formats --===//
//
// Parameters are kept in fp32 on the host in the layout of HF's GPT-2
// (Conv1D: projection weights are [in, out], so y = x @ W + b), whatever the
// file held; the model converts them to its compute dtype when it uploads.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/gpt2/config.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::gpt2 {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
  int64_t numel() const;
};

struct LayerWeights {
  Tensor ln_1_w, ln_1_b;
  Tensor c_attn_w, c_attn_b; ///< [C, 3C], [3C]
  Tensor c_proj_w, c_proj_b; ///< [C, C], [C]
  Tensor ln_2_w, ln_2_b;
  Tensor c_fc_w, c_fc_b;         ///< [C, 4C], [4C]
  Tensor mlp_proj_w, mlp_proj_b; ///< [4C, C], [C]
};

struct Weights {
  Config config;
  Tensor wte; ///< [V, C], also the LM head (tied)
  Tensor wpe; ///< [n_ctx, C]
  std::vector<LayerWeights> layers;
  Tensor ln_f_w, ln_f_b;

  /// Every tensor with its HF name, in a fixed order (the order of `random`).
  std::vector<std::pair<std::string, Tensor *>> named();

  /// A HF GPT-2 directory: config.json and model.safetensors (fp32, fp16 or
  /// bf16; names with or without a "transformer." prefix).
  /// Every file is validated exactly before use: the header's data offsets
  /// must tile the data, sizes are integers within Config's limits, and no
  /// parameter may be NaN or infinite; anything else throws kiln::Error.
  static Weights from_hf_dir(const std::string &dir);
  static Weights from_safetensors(const std::string &path, const Config &config);
  /// The same from a safetensors image in memory; `name` stands for the
  /// file in messages.
  static Weights from_safetensors_bytes(std::string_view bytes, const Config &config,
                                        const std::string &name = "<memory>");
  /// llm.c's checkpoint (gpt2_124M.bin: fp32, version 3; bf16, version 5);
  /// its size must be exactly what its header describes.
  static Weights from_llmc(const std::string &path);
  static Weights from_llmc_bytes(std::string_view bytes, const std::string &name = "<memory>");
  /// Seeded weights: tensor i of `named()` holds a counter-based stream
  /// (splitmix64), so that other tools can regenerate them exactly
  /// (tests/gpt2/make_golden.py does).
  static Weights random(const Config &config, uint64_t seed);

  /// Writes model.safetensors (fp32) and config.json into `dir`.
  void save_hf_dir(const std::string &dir);
};

/// Reads the config.json of a HF GPT-2 directory.
Config read_hf_config(const std::string &path);
/// The same from its text; `path` names it in messages.
Config parse_hf_config(const std::string &text, const std::string &path);

} // namespace kiln::gpt2
