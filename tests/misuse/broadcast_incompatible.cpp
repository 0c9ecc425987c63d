// (64) and (32) do not broadcast.
// EXPECT-ERROR: kiln: operand shapes are not broadcast-compatible
#include "kiln/kiln.hpp"
using namespace kiln;
struct K {
  void operator()(Ptr<f32> p) const { auto c = zeros<f32, 64>() * zeros<f32, 32>(); }
};
auto k = compile<K>(Target::cpu());
