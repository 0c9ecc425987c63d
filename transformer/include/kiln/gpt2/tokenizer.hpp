//===- tokenizer.hpp - GPT-2's byte-level BPE ------------------------------===//
//
// Reads the vocabulary (vocab.json / encoder.json: token string -> id) and
// the merges (merges.txt / vocab.bpe), splits text the way GPT-2 does (its
// contraction / letters / numbers / symbols / spaces pattern), maps every
// byte to a printable code point and applies the merges by rank. Decoding
// maps ids back to bytes, so any UTF-8 text round-trips exactly.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::gpt2 {

class Tokenizer {
public:
  /// Loads `vocab` (JSON object of token -> id) and `merges` (one "a b" pair
  /// per line, after an optional "#version" line). Throws kiln::Error with
  /// the file and what is wrong.
  static Tokenizer load(const std::string &vocab, const std::string &merges);
  /// Looks for vocab.json + merges.txt, then encoder.json + vocab.bpe, in `dir`.
  static Tokenizer from_dir(const std::string &dir);

  std::vector<int32_t> encode(std::string_view text) const;
  std::string decode(const std::vector<int32_t> &ids) const;
  /// The bytes of one token (possibly part of a UTF-8 sequence).
  std::string token_bytes(int32_t id) const;

  /// GPT-2's pre-tokenisation: the pieces BPE runs on, as UTF-8.
  static std::vector<std::string> split(std::string_view text);

  int32_t vocab_size() const;
  int32_t eot() const { return eot_; } ///< <|endoftext|>, 50256 for GPT-2

  Tokenizer(Tokenizer &&) noexcept;
  Tokenizer &operator=(Tokenizer &&) noexcept;
  ~Tokenizer();

private:
  Tokenizer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int32_t eot_ = -1;
};

} // namespace kiln::gpt2
