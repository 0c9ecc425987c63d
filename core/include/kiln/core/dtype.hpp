//===- dtype.hpp - element types of kiln tiles ----------------------------===//
//
// Element-type tags used in tile types (`Tile<f16, 128>`), their runtime
// descriptors, and host-side storage types for f16 / bf16.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

namespace kiln {

/// Runtime descriptor of an element type.
enum class DType : uint8_t { I1, I8, I32, I64, F16, BF16, F32, F64, Ptr };

std::string_view to_string(DType t);
inline bool is_float(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64;
}

/// IEEE binary16 storage on the host.
struct half {
  uint16_t bits = 0;
  half() = default;
  half(float f) : bits(from_float(f)) {}
  operator float() const { return to_float(bits); }
  static uint16_t from_float(float f);
  static float to_float(uint16_t h);
};

/// bfloat16 storage on the host (round to nearest even).
struct bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  bfloat16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if (std::isnan(f))
      bits = 0x7fc0;
    else
      bits = uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);
  }
  operator float() const {
    uint32_t u = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

// Element-type tags. `host` is the C++ type a host buffer of this dtype holds.
struct i1 { static constexpr DType id = DType::I1; static constexpr const char *name = "i1"; using host = bool; };
struct i8 { static constexpr DType id = DType::I8; static constexpr const char *name = "i8"; using host = int8_t; };
struct i32 { static constexpr DType id = DType::I32; static constexpr const char *name = "i32"; using host = int32_t; };
struct i64 { static constexpr DType id = DType::I64; static constexpr const char *name = "i64"; using host = int64_t; };
struct f16 { static constexpr DType id = DType::F16; static constexpr const char *name = "f16"; using host = half; };
struct bf16 { static constexpr DType id = DType::BF16; static constexpr const char *name = "bf16"; using host = bfloat16; };
struct f32 { static constexpr DType id = DType::F32; static constexpr const char *name = "f32"; using host = float; };
struct f64 { static constexpr DType id = DType::F64; static constexpr const char *name = "f64"; using host = double; };

/// Pointer to global memory holding `E`s.
template <class E> struct ptr {
  static constexpr DType id = DType::Ptr;
  using element = E;
};

template <class T> inline constexpr bool is_float_v =
    std::is_same_v<T, f16> || std::is_same_v<T, bf16> || std::is_same_v<T, f32> || std::is_same_v<T, f64>;
template <class T> inline constexpr bool is_int_v =
    std::is_same_v<T, i1> || std::is_same_v<T, i8> || std::is_same_v<T, i32> || std::is_same_v<T, i64>;
template <class T> struct is_ptr : std::false_type {};
template <class E> struct is_ptr<ptr<E>> : std::true_type {};
template <class T> inline constexpr bool is_ptr_v = is_ptr<T>::value;
template <class T> inline constexpr bool is_dtype_v = is_float_v<T> || is_int_v<T> || is_ptr_v<T>;

} // namespace kiln
