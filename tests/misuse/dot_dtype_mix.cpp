// dot operands must share one dtype.
// EXPECT-ERROR: kiln::dot: operands must be 2-D tiles of one dtype
#include "kiln/kiln.hpp"
using namespace kiln;
struct K {
  void operator()(Ptr<f16> p) const { auto c = dot(zeros<f16, 16, 16>(), zeros<f32, 16, 16>()); }
};
auto k = compile<K>(Target::cpu());
