// Kernel parameters are kiln scalars or pointers, not C++ types.
// EXPECT-ERROR: kiln: kernel parameters must be scalars (I32, I64, F32, ...) or pointers (Ptr<T>)
#include "kiln/kiln.hpp"
using namespace kiln;
struct K {
  void operator()(Ptr<f32> p, int n) const {}
};
auto k = compile<K>(Target::cpu());
