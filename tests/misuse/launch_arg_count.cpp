// Launching with the wrong number of arguments.
// EXPECT-ERROR: kiln::Kernel::launch: wrong number of arguments for this kernel
#include "kiln/kiln.hpp"
using namespace kiln;
struct K {
  void operator()(Ptr<f32> p, I32 n) const {}
};
void f(float *x) { compile<K>(Target::cpu()).launch(Grid(1), x); }
