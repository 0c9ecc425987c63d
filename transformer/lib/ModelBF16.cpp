//===- ModelBF16.cpp - GPT-2 in bf16 ---------------------------------------===//
#include "ModelImpl.h"

namespace kiln::gpt2::impl {
template std::unique_ptr<Model::Impl> make_model<bf16>(const Weights &, const Target &, Precision,
                                                     ModelOptions);
} // namespace kiln::gpt2::impl
