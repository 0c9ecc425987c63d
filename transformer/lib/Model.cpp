//===- Model.cpp - gpt2::Model: precisions, modes, the public calls --------===//
#include "ModelBase.h"

#include "kiln/kiln.hpp"

#include <string>

namespace kiln::gpt2 {

Precision parse_precision(const std::string &name) {
  if (name == "fp32" || name == "f32")
    return Precision::F32;
  if (name == "fp16" || name == "f16")
    return Precision::F16;
  if (name == "bf16")
    return Precision::BF16;
  throw Error("gpt2: unknown precision '" + name + "' (fp32, fp16 or bf16)");
}

std::string to_string(Precision p) {
  return p == Precision::F32 ? "fp32" : p == Precision::F16 ? "fp16" : "bf16";
}

Mode parse_mode(const std::string &name) {
  if (name == "default")
    return Mode::Default;
  if (name == "reduce-overhead")
    return Mode::ReduceOverhead;
  if (name == "max-autotune")
    return Mode::MaxAutotune;
  throw Error("gpt2: unknown mode '" + name + "' (default, reduce-overhead or max-autotune)");
}

std::string to_string(Mode m) {
  return m == Mode::Default ? "default" : m == Mode::ReduceOverhead ? "reduce-overhead" : "max-autotune";
}

ModelOptions apply_mode(Mode mode, ModelOptions o) {
  o.cuda_graphs = mode != Mode::Default;
  o.tuning = mode == Mode::MaxAutotune ? Tuning::Tune : Tuning::Cached;
  return o;
}


Model::Model(const Weights &weights, const Target &target, Precision precision,
             ModelOptions options) {
  if (target.kind == Target::Kind::Cpu && precision != Precision::F32)
    throw Error("gpt2: the CPU backend runs fp32 only (got " + to_string(precision) + ")");
  switch (precision) {
  case Precision::F32:
    impl_ = impl::make_model<f32>(weights, target, precision, options);
    break;
#ifdef KILN_GPT2_HALF_MODELS
  case Precision::F16:
    impl_ = impl::make_model<f16>(weights, target, precision, options);
    break;
  case Precision::BF16:
    impl_ = impl::make_model<bf16>(weights, target, precision, options);
    break;
#else
  case Precision::F16:
  case Precision::BF16:
    throw Error("gpt2: this build has fp32 models only (configured with KILN_GPT2_HALF_MODELS=OFF)");
#endif
  }
}
Model::~Model() = default;
Model::Model(Model &&) noexcept = default;

const Config &Model::config() const { return impl_->cfg; }
std::vector<float> Model::logits(const std::vector<int32_t> &tokens) {
  return impl_->logits(tokens);
}
std::vector<std::vector<int32_t>>
Model::generate(const std::vector<std::vector<int32_t>> &prompts, const GenerateOptions &options,
                const std::function<void(int, int32_t)> &on_token) {
  return impl_->generate(prompts, options, on_token);
}
const Explain &Model::explain() const { return impl_->info; }
StepProfile Model::profile_decode(const std::vector<std::vector<int32_t>> &prompts, int steps) {
  return impl_->profile_decode(prompts, steps);
}

} // namespace kiln::gpt2
