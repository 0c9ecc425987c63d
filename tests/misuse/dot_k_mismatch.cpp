// A dot whose inner dimensions differ is rejected at compile time.
// EXPECT-ERROR: kiln::dot: K of lhs (columns) != K of rhs (rows)
#include "kiln/kiln.hpp"
using namespace kiln;
struct K {
  void operator()(Ptr<f16> p) const {
    auto a = zeros<f16, 16, 32>();
    auto b = zeros<f16, 16, 16>();
    auto c = dot(a, b);
  }
};
auto k = compile<K>(Target::cpu());
