// TF32 rounding is only for f32 products: asking for it on f16 tiles is rejected at compile time.
// EXPECT-ERROR: kiln::dot: InputPrecision::tf32 applies to f32 operands
#include "kiln/kiln.hpp"
using namespace kiln;
struct K {
  void operator()(Ptr<f16> p) const {
    auto a = zeros<f16, 16, 32>();
    auto b = zeros<f16, 32, 16>();
    auto c = dot<InputPrecision::tf32>(a, b);
  }
};
auto k = compile<K>(Target::cpu());
