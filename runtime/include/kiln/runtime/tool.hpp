//===- tool.hpp - what kiln's command-line tools share --------------------===//
//
// kiln-gpt2, kiln-gpt2-bench and the numbered lessons parse their flags with
// CLI11 and end the same way: one line on stderr and exit status 2 for a
// usage error, 1 for anything that went wrong at run time, whatever was
// thrown (kiln::Error, a filesystem error, std::bad_alloc, ...).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/runtime/kernel.hpp"

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <new>
#include <string>

namespace kiln::tool {

/// A mistake on the command line: exit status 2.
class UsageError : public Error {
public:
  using Error::Error;
};

/// Parses `argv` into `app`; every CLI11 complaint becomes a UsageError
/// worded as kiln words them ("unknown flag '--x'"). Returns false when
/// --help was asked for and printed.
inline bool parse(CLI::App &app, int argc, char **argv) {
  app.allow_extras();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &) {
    std::fputs(app.help().c_str(), stdout);
    return false;
  } catch (const CLI::ParseError &e) {
    throw UsageError(e.what());
  }
  for (const std::string &extra : app.remaining())
    throw UsageError(extra.rfind("-", 0) == 0 ? "unknown flag '" + extra + "'"
                                              : "unexpected argument '" + extra + "'");
  return true;
}

/// A CLI11 check that the value is an integer in [lo, hi].
inline CLI::Validator integer(long long lo, long long hi) {
  return CLI::Validator(
      [lo, hi](std::string &v) -> std::string {
        std::size_t used = 0;
        long long n = 0;
        try {
          n = std::stoll(v, &used);
        } catch (...) {
          used = 0;
        }
        if (used == 0 || used != v.size() || n < lo || n > hi)
          return "expects an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                 "], got '" + v + "'";
        return {};
      },
      "INT");
}

/// A CLI11 check that the value is a finite number.
inline CLI::Validator number() {
  return CLI::Validator(
      [](std::string &v) -> std::string {
        std::size_t used = 0;
        double x = 0;
        try {
          x = std::stod(v, &used);
        } catch (...) {
          used = 0;
        }
        if (used == 0 || used != v.size() || !std::isfinite(x))
          return "expects a finite number, got '" + v + "'";
        return {};
      },
      "NUMBER");
}

/// Runs a tool's `body` (returning its exit status) and turns whatever it
/// throws into `<name>: error: <message>` on stderr and a non-zero exit.
template <class F> int run(const char *name, F &&body) noexcept {
  auto fail = [name](const std::string &what, int status) {
    std::fprintf(stderr, "%s: error: %s\n", name, what.c_str());
    if (status == 2)
      std::fprintf(stderr, "(see %s --help)\n", name);
    return status;
  };
  try {
    return body();
  } catch (const UsageError &e) {
    return fail(e.what(), 2);
  } catch (const Error &e) {
    return fail(e.what(), 1);
  } catch (const std::filesystem::filesystem_error &e) {
    return fail(e.what(), 1);
  } catch (const std::bad_alloc &) {
    return fail("out of host memory", 1);
  } catch (const std::exception &e) {
    return fail(e.what(), 1);
  } catch (...) {
    return fail("unknown exception", 1);
  }
}

} // namespace kiln::tool
