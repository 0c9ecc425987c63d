//===- Json.cpp - a small JSON reader for model headers --------------------===//
#include "Json.h"

#include "kiln/runtime/kernel.hpp"

#include <cctype>
#include <cstdlib>

namespace kiln::gpt2::json {
namespace {

struct Parser {
  const std::string &s;
  const std::string &what;
  std::size_t i = 0;
  int depth = 0;

  [[noreturn]] void fail(const std::string &msg) {
    throw Error(what + ": malformed JSON: " + msg + " at byte " + std::to_string(i));
  }
  void ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])))
      ++i;
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c))
      fail(std::string("expected '") + c + "'");
  }
  char32_t hex4() {
    if (i + 4 > s.size())
      fail("truncated \\u escape");
    char32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s[i++];
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0)
        fail("bad \\u escape");
      v = v * 16 + char32_t(d);
    }
    return v;
  }
  std::string str() {
    ws();
    if (i >= s.size() || s[i] != '"')
      fail("expected a string");
    ++i;
    std::string out;
    while (i < s.size() && s[i] != '"') {
      char c = s[i++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i >= s.size())
        fail("unterminated escape");
      char e = s[i++];
      switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'u': {
        char32_t cp = hex4();
        if (cp >= 0xD800 && cp <= 0xDBFF && s.compare(i, 2, "\\u") == 0) {
          i += 2;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (hex4() - 0xDC00);
        }
        appendUtf8(out, cp);
        break;
      }
      default:
        out += e;
      }
    }
    if (i >= s.size())
      fail("unterminated string");
    ++i;
    return out;
  }
  Value value() {
    if (++depth > 64)
      fail("nested too deeply");
    ws();
    if (i >= s.size())
      fail("unexpected end");
    Value v;
    char c = s[i];
    if (c == '{') {
      ++i;
      v.kind = Value::Kind::Object;
      if (!eat('}')) {
        do {
          std::string key = str();
          expect(':');
          v.object[key] = value();
        } while (eat(','));
        expect('}');
      }
    } else if (c == '[') {
      ++i;
      v.kind = Value::Kind::Array;
      if (!eat(']')) {
        do
          v.array.push_back(value());
        while (eat(','));
        expect(']');
      }
    } else if (c == '"') {
      v.kind = Value::Kind::String;
      v.string = str();
    } else if (s.compare(i, 4, "true") == 0) {
      v.kind = Value::Kind::Bool;
      v.boolean = true;
      i += 4;
    } else if (s.compare(i, 5, "false") == 0) {
      v.kind = Value::Kind::Bool;
      i += 5;
    } else if (s.compare(i, 4, "null") == 0) {
      i += 4;
    } else {
      char *end = nullptr;
      v.number = std::strtod(s.c_str() + i, &end);
      if (end == s.c_str() + i)
        fail("unexpected character");
      v.kind = Value::Kind::Number;
      i = std::size_t(end - s.c_str());
    }
    --depth;
    return v;
  }
};

} // namespace

Value parse(const std::string &text, const std::string &what) {
  Parser p{text, what};
  Value v = p.value();
  p.ws();
  if (p.i != text.size())
    p.fail("trailing characters");
  return v;
}

} // namespace kiln::gpt2::json
