//===- ModelBase.h - what the model's precisions share ---------------------===//
//
// gpt2::Model holds a Model::Impl; each precision's implementation
// (ModelImpl<D>, ModelImpl.h) is compiled in a translation unit of its own
// (ModelF32.cpp, ModelF16.cpp, ModelBF16.cpp), in parallel.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/gpt2/model.hpp"

#include <functional>
#include <memory>
#include <vector>

namespace kiln::gpt2 {

struct Model::Impl {
  Config cfg;
  Target target;
  Precision precision;
  ModelOptions opts;
  Explain info;
  bool gpu;
  int Tmax;
  virtual ~Impl() = default;
  Impl(const Config &c, const Target &t, Precision p, ModelOptions o)
      : cfg(c), target(t), precision(p), opts(o), gpu(t.kind == Target::Kind::Cuda),
        Tmax(o.max_seq > 0 ? std::min(o.max_seq, c.n_ctx) : c.n_ctx) {}
  virtual std::vector<float> logits(const std::vector<int32_t> &tokens) = 0;
  virtual std::vector<std::vector<int32_t>>
  generate(const std::vector<std::vector<int32_t>> &prompts, const GenerateOptions &o,
           const std::function<void(int, int32_t)> &cb) = 0;
  virtual StepProfile profile_decode(const std::vector<std::vector<int32_t>> &prompts,
                                     int steps) = 0;
};


namespace impl {
/// The model in precision D: ModelImpl<D>, instantiated by ModelF32.cpp,
/// ModelF16.cpp and ModelBF16.cpp.
template <class D>
std::unique_ptr<Model::Impl> make_model(const Weights &w, const Target &t, Precision p, ModelOptions o);
} // namespace impl

} // namespace kiln::gpt2
