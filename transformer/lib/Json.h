//===- Json.h - a small JSON reader for model headers (internal) -----------===//
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln::gpt2::json {

struct Value {
  enum class Kind { Null, Bool, Number, String, Array, Object } kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Value> array;
  std::map<std::string, Value> object;

  const Value *find(const std::string &key) const {
    auto it = object.find(key);
    return it == object.end() ? nullptr : &it->second;
  }
};

/// Parses `text`; throws kiln::Error naming `what` and the byte offset.
Value parse(const std::string &text, const std::string &what);

} // namespace kiln::gpt2::json
