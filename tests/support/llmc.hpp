//===- llmc.hpp - writing llm.c checkpoints for tests ---------------------===//
#pragma once

#include "kiln/core/dtype.hpp"
#include "kiln/gpt2/weights.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::test {

/// An llm.c checkpoint of `w`: the 256-int header `header` (its fields as
/// given, zero after them), then every parameter in llm.c's order with
/// projections as [out, in] and wte padded to `Vp` rows; bf16 when
/// `version` is 5, else fp32. Header fields need not describe the body.
inline std::string llmc_bytes(gpt2::Weights &w, const std::vector<int32_t> &header, int64_t Vp,
                              int version) {
  int32_t h[256] = {};
  for (std::size_t i = 0; i < header.size() && i < 256; ++i)
    h[i] = header[i];
  std::string out(reinterpret_cast<const char *>(h), sizeof h);
  auto put = [&](const std::vector<float> &v) {
    for (float x : v) {
      if (version == 5) {
        uint16_t bits = bfloat16(x).bits;
        out.append(reinterpret_cast<const char *>(&bits), 2);
      } else {
        out.append(reinterpret_cast<const char *>(&x), 4);
      }
    }
  };
  auto tr = [](const gpt2::Tensor &t) {
    int64_t in = t.shape[0], o = t.shape[1];
    std::vector<float> r(t.data.size());
    for (int64_t i = 0; i < in; ++i)
      for (int64_t j = 0; j < o; ++j)
        r[std::size_t(j * in + i)] = t.data[std::size_t(i * o + j)];
    return r;
  };
  std::vector<float> wte = w.wte.data;
  wte.resize(std::size_t(Vp * w.config.n_embd), 0.f);
  put(wte);
  put(w.wpe.data);
  auto each = [&](auto get) {
    for (auto &l : w.layers)
      put(get(l));
  };
  using L = gpt2::LayerWeights;
  each([](L &l) { return l.ln_1_w.data; });
  each([](L &l) { return l.ln_1_b.data; });
  each([&](L &l) { return tr(l.c_attn_w); });
  each([](L &l) { return l.c_attn_b.data; });
  each([&](L &l) { return tr(l.c_proj_w); });
  each([](L &l) { return l.c_proj_b.data; });
  each([](L &l) { return l.ln_2_w.data; });
  each([](L &l) { return l.ln_2_b.data; });
  each([&](L &l) { return tr(l.c_fc_w); });
  each([](L &l) { return l.c_fc_b.data; });
  each([&](L &l) { return tr(l.mlp_proj_w); });
  each([](L &l) { return l.mlp_proj_b.data; });
  put(w.ln_f_w.data);
  put(w.ln_f_b.data);
  return out;
}

} // namespace kiln::test
