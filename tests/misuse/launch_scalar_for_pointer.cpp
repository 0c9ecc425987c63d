// An integer where the kernel expects a pointer.
// EXPECT-ERROR: kiln::Kernel::launch: a Ptr<T> parameter needs a pointer argument
#include "kiln/kiln.hpp"
using namespace kiln;
struct K {
  void operator()(Ptr<f32> p, I32 n) const {}
};
void f() { compile<K>(Target::cpu()).launch(Grid(1), 3, 4); }
