//===- ModelF32.cpp - GPT-2 in f32 ---------------------------------------===//
#include "ModelImpl.h"

namespace kiln::gpt2::impl {
template std::unique_ptr<Model::Impl> make_model<f32>(const Weights &, const Target &, Precision,
                                                     ModelOptions);
} // namespace kiln::gpt2::impl
