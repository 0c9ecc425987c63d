// exp of integers is not defined.
// EXPECT-ERROR: kiln::exp: needs a floating-point tile
#include "kiln/kiln.hpp"
using namespace kiln;
struct K {
  void operator()(Ptr<f32> p) const { auto r = exp(arange<8>()); }
};
auto k = compile<K>(Target::cpu());
