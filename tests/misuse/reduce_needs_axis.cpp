// Reducing a 2-D tile needs the axis.
// EXPECT-ERROR: kiln: reducing a tile of rank > 1 needs the axis: sum<1>(x)
#include "kiln/kiln.hpp"
using namespace kiln;
struct K {
  void operator()(Ptr<f32> p) const { auto s = sum(zeros<f32, 4, 8>()); }
};
auto k = compile<K>(Target::cpu());
