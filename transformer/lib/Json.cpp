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
        if (i + 4 > s.size())
          fail("truncated \\u escape");
        unsigned cp = unsigned(std::strtoul(s.substr(i, 4).c_str(), nullptr, 16));
        i += 4;
        if (cp < 0x80) {
          out += char(cp);
        } else if (cp < 0x800) {
          out += char(0xC0 | (cp >> 6));
          out += char(0x80 | (cp & 0x3F));
        } else {
          out += char(0xE0 | (cp >> 12));
          out += char(0x80 | ((cp >> 6) & 0x3F));
          out += char(0x80 | (cp & 0x3F));
        }
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
