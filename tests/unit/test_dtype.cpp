//===- test_dtype.cpp - host f16/bf16 conversions and static shapes -------===//
#include <doctest/doctest.h>

#include "kiln/kiln.hpp"

#include <cmath>

using namespace kiln;

TEST_CASE("half round-trips every finite f16 value exactly") {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    uint16_t h = uint16_t(bits);
    if (((h >> 10) & 0x1f) == 0x1f)
      continue; // inf / nan
    float f = half::to_float(h);
    REQUIRE(half::from_float(f) == h);
  }
}

TEST_CASE("half rounds to nearest even and saturates to infinity") {
  CHECK(float(half(1.0f)) == 1.0f);
  CHECK(float(half(65504.0f)) == 65504.0f);
  CHECK(std::isinf(float(half(70000.0f))));
  CHECK(float(half(1.0f + 1.0f / 2048)) == 1.0f);             // tie -> even
  CHECK(float(half(1.0f + 3.0f / 2048)) == 1.0f + 1.0f / 512); // tie -> even (up)
  CHECK(float(half(5.96e-8f)) == doctest::Approx(5.9604645e-8f)); // smallest subnormal
  CHECK(std::isnan(float(half(NAN))));
}

TEST_CASE("bfloat16 keeps the f32 exponent range") {
  CHECK(float(bfloat16(1e30f)) == doctest::Approx(1e30f).epsilon(1e-2));
  CHECK(float(bfloat16(1.0f)) == 1.0f);
  CHECK(std::isnan(float(bfloat16(NAN))));
}

// Shapes are computed at compile time.
static_assert(std::is_same_v<detail::Broadcast<Tile<f32, 64, 1>, Tile<f32, 1, 32>>::tile<f32>,
                             Tile<f32, 64, 32>>);
static_assert(std::is_same_v<detail::Broadcast<Tile<f32>, Tile<f32, 8>>::tile<f32>, Tile<f32, 8>>);
static_assert(std::is_same_v<detail::Broadcast<Tile<f32, 8>, Tile<f32, 4, 8>>::tile<f32>,
                             Tile<f32, 4, 8>>);
static_assert(!detail::Broadcast<Tile<f32, 8>, Tile<f32, 4>>::ok);
static_assert(detail::drop_axis(std::array<int, 3>{2, 3, 4}, 1) == std::array<int, 2>{2, 4});
