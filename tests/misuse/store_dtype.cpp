// Stores need a value of the pointee dtype.
// EXPECT-ERROR: kiln::store: value dtype differs from the pointee dtype; use cast<T>()
#include "kiln/kiln.hpp"
using namespace kiln;
struct K {
  void operator()(Ptr<f16> p) const { store(p + arange<8>(), zeros<f32, 8>()); }
};
auto k = compile<K>(Target::cpu());
