// A float literal would be truncated on an integer tile.
// EXPECT-ERROR: kiln: a floating-point literal cannot be combined with an integer tile
#include "kiln/kiln.hpp"
using namespace kiln;
struct K {
  void operator()(Ptr<f32> p) const { auto r = arange<8>() * 0.5; }
};
auto k = compile<K>(Target::cpu());
