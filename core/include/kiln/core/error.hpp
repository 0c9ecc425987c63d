//===- error.hpp - the one exception kiln throws --------------------------===//
#pragma once

#include <stdexcept>

namespace kiln {

/// Every error a user can cause (bad launch, bad IR, missing GPU, bad model
/// files) is reported by throwing this, with a message that says what is wrong.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

} // namespace kiln
