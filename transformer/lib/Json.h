//===- Json.h - strict JSON for model and tokenizer files (internal) -------===//
//
// Model headers, config.json and vocabularies are read with nlohmann::json,
// made strict where a lenient reader would load the wrong model: a key that
// appears twice in one object is an error (nlohmann keeps the last one), and
// every failure is a kiln::Error naming the file. nlohmann already rejects
// ill-formed UTF-8, lone surrogates and trailing garbage.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/core/error.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

namespace kiln::gpt2::json {

using Value = nlohmann::json;

/// Parses `text`; throws kiln::Error naming `what` for malformed JSON, for a
/// duplicate key, or for nesting deeper than `maxDepth`.
inline Value parse(const std::string &text, const std::string &what, int maxDepth = 64) {
  std::vector<std::set<std::string>> keys; // the keys of every open object
  std::string problem;
  auto check = [&](int depth, nlohmann::json::parse_event_t event, Value &parsed) {
    using E = nlohmann::json::parse_event_t;
    if (depth > maxDepth && problem.empty())
      problem = "nested deeper than " + std::to_string(maxDepth) + " levels";
    if (event == E::object_start)
      keys.emplace_back();
    else if (event == E::object_end && !keys.empty())
      keys.pop_back();
    else if (event == E::key && !keys.empty() &&
             !keys.back().insert(parsed.get<std::string>()).second && problem.empty())
      problem = "duplicate key \"" + parsed.get<std::string>() + "\"";
    return problem.empty();
  };
  Value v;
  try {
    v = Value::parse(text, check);
  } catch (const nlohmann::json::exception &e) {
    std::string msg = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
    if (auto at = msg.find("] "); at != std::string::npos)
      msg = msg.substr(at + 2);
    throw Error(what + ": malformed JSON: " + msg);
  }
  if (!problem.empty())
    throw Error(what + ": malformed JSON: " + problem);
  return v;
}

/// The value of an integer-valued JSON number (not 64.0, not 0.5, not "64")
/// in [lo, hi]; otherwise throws kiln::Error naming `what`.
inline int64_t integer(const Value &v, const std::string &what, int64_t lo = 0,
                       int64_t hi = std::numeric_limits<int64_t>::max()) {
  bool ok = false;
  int64_t n = 0;
  if (v.is_number_unsigned()) {
    auto u = v.get<uint64_t>();
    ok = u <= uint64_t(std::numeric_limits<int64_t>::max());
    n = int64_t(u);
  } else if (v.is_number_integer()) {
    n = v.get<int64_t>();
    ok = true;
  }
  if (!ok || n < lo || n > hi)
    throw Error(what + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                "], got " + v.dump());
  return n;
}

} // namespace kiln::gpt2::json
