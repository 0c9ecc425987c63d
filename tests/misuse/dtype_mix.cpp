// Arithmetic never converts dtypes silently.
// EXPECT-ERROR: kiln: operands have different dtypes; convert one with cast<T>()
#include "kiln/kiln.hpp"
using namespace kiln;
struct K {
  void operator()(Ptr<f16> p) const { auto c = zeros<f16, 8>() + zeros<f32, 8>(); }
};
auto k = compile<K>(Target::cpu());
