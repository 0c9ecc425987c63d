// trans takes a matrix.
// EXPECT-ERROR: kiln::trans: expects a 2-D tile
#include "kiln/kiln.hpp"
using namespace kiln;
struct K {
  void operator()(Ptr<f32> p) const { trans(zeros<f32, 8>()); }
};
auto k = compile<K>(Target::cpu());
