// A double buffer for a Ptr<f32> parameter.
// EXPECT-ERROR: kiln::Kernel::launch: pointer argument's element type differs from the kernel parameter's
#include "kiln/kiln.hpp"
using namespace kiln;
struct K {
  void operator()(Ptr<f32> p, I32 n) const {}
};
void f(double *x) { compile<K>(Target::cpu()).launch(Grid(1), x, 4); }
