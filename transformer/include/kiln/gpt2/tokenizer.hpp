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
#include <optional>
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
  /// The same from the files' contents; the paths only name them in messages.
  static Tokenizer from_text(const std::string &vocabJson, const std::string &mergesText,
                             const std::string &vocabPath = "vocab.json",
                             const std::string &mergesPath = "merges.txt");
  /// Looks for vocab.json + merges.txt, then encoder.json + vocab.bpe, in `dir`.
  static Tokenizer from_dir(const std::string &dir);

  /// GPT-2's tokens for `text`. "<|endoftext|>" in the text is the special
  /// token, as in HF's GPT-2 tokenizers.
  std::vector<int32_t> encode(std::string_view text) const;
  /// encode(text) if that has at most `max_tokens` tokens, else std::nullopt.
  /// It gives up as soon as the answer is known, so the work is bounded by
  /// `max_tokens` rather than by the text: a text of more bytes than
  /// max_tokens times the longest token is rejected without being read, and
  /// otherwise tokenising stops at the first piece that goes over. Meant for
  /// prompts that must fit a context.
  std::optional<std::vector<int32_t>> encode(std::string_view text, std::size_t max_tokens) const;
  std::string decode(const std::vector<int32_t> &ids) const;
  /// The bytes of one token (possibly part of a UTF-8 sequence).
  std::string token_bytes(int32_t id) const;

  /// GPT-2's pre-tokenisation: the pieces BPE runs on, as UTF-8. It is HF's
  /// pattern 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  /// with the character classes of HF's regex engine; bytes that are not
  /// UTF-8 count as "other" symbols.
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
