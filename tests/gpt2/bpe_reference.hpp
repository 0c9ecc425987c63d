//===- bpe_reference.hpp - GPT-2's BPE as its reference code does it -------===//
//
// The merge loop of GPT-2's encoder.py, kept deliberately simple and slow
// (quadratic in the length of a piece): find the adjacent pair of lowest
// rank, merge every occurrence of it in one left-to-right sweep, repeat.
// Tests compare the tokenizer's fast merging with it, token by token.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <array>
#include <climits>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln::test {

class ReferenceBpe {
public:
  /// Reads a merges file ("a b" per line, after an optional "#version").
  explicit ReferenceBpe(const std::string &mergesPath) {
    std::ifstream in(mergesPath, std::ios::binary);
    if (!in)
      throw std::runtime_error("cannot open " + mergesPath);
    std::string line;
    for (int lineNo = 1; std::getline(in, line); ++lineNo) {
      if (!line.empty() && line.back() == '\r')
        line.pop_back();
      if (line.empty() || (lineNo == 1 && line.rfind("#version", 0) == 0))
        continue;
      ranks_.emplace(line, int(ranks_.size()));
    }
    // GPT-2's byte map: printable Latin-1 bytes stand for themselves, the
    // others for U+0100 onwards, in byte order.
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      int cp = printable ? b : next++;
      std::string s;
      if (cp < 0x80) {
        s += char(cp);
      } else {
        s += char(0xC0 | (cp >> 6));
        s += char(0x80 | (cp & 0x3F));
      }
      symbol_[std::size_t(b)] = s;
      byteOf_[s] = char(b);
    }
  }

  /// The tokens of one pre-tokenised piece, each as the bytes it stands for.
  std::vector<std::string> encodePiece(std::string_view piece) const {
    std::vector<std::string> word;
    for (unsigned char b : piece)
      word.push_back(symbol_[b]);
    while (word.size() > 1) {
      int best = INT_MAX;
      for (std::size_t k = 0; k + 1 < word.size(); ++k) {
        auto r = ranks_.find(word[k] + ' ' + word[k + 1]);
        if (r != ranks_.end() && r->second < best)
          best = r->second;
      }
      if (best == INT_MAX)
        break;
      std::string first, second;
      for (std::size_t k = 0; k + 1 < word.size(); ++k) {
        auto r = ranks_.find(word[k] + ' ' + word[k + 1]);
        if (r != ranks_.end() && r->second == best) {
          first = word[k];
          second = word[k + 1];
          break;
        }
      }
      std::vector<std::string> merged;
      for (std::size_t k = 0; k < word.size();) {
        if (k + 1 < word.size() && word[k] == first && word[k + 1] == second) {
          merged.push_back(first + second);
          k += 2;
        } else {
          merged.push_back(word[k++]);
        }
      }
      word = std::move(merged);
    }
    std::vector<std::string> out;
    for (const std::string &sym : word)
      out.push_back(bytes(sym));
    return out;
  }

private:
  /// The bytes a byte-mapped symbol stands for.
  std::string bytes(const std::string &sym) const {
    std::string out;
    for (std::size_t i = 0; i < sym.size();) {
      std::size_t len = (static_cast<unsigned char>(sym[i]) & 0x80) ? 2 : 1;
      out += byteOf_.at(sym.substr(i, len));
      i += len;
    }
    return out;
  }

  std::unordered_map<std::string, int> ranks_; // "a b" -> rank
  std::array<std::string, 256> symbol_;        // byte -> its symbol
  std::unordered_map<std::string, char> byteOf_;
};

} // namespace kiln::test
