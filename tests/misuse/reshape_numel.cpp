// reshape keeps the element count.
// EXPECT-ERROR: kiln::reshape: element count must not change
#include "kiln/kiln.hpp"
using namespace kiln;
struct K {
  void operator()(Ptr<f32> p) const { auto r = reshape<4, 4>(zeros<f32, 8>()); }
};
auto k = compile<K>(Target::cpu());
