// Control-channel authentication: token checks, HMAC-SHA-256 from libsodium, the handshake and line MACs.
#include "auth.hpp"

#include <sodium.h>
#include <sys/stat.h>

#include <cctype>
#include <cstdio>
#include <sstream>

#include "hosts_file.hpp"
#include "phub/base/bytes.hpp"

namespace phub::probe {
namespace {

constexpr std::string_view kInitiatorProof = "phub-probe 2 initiator", kAgentProof = "phub-probe 2 agent",
                           kSessionKey = "phub-probe 2 session", kFromInitiator = "i>a", kFromAgent = "a>i";
using Nonce = std::array<uint8_t, 32>;

std::span<const uint8_t> bytes_of(std::string_view s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

bool sodium_ready() {
  static const bool ok = sodium_init() >= 0;
  return ok;
}

bool equal(const Mac& a, const Mac& b) { return crypto_verify_32(a.data(), b.data()) == 0; }

struct Proofs {
  Mac initiator, agent, session;
};

Proofs proofs(std::string_view token, const Nonce& an, const Nonce& cn) {
  return {hmac_sha256(token, {bytes_of(kInitiatorProof), an, cn}), hmac_sha256(token, {bytes_of(kAgentProof), an, cn}),
          hmac_sha256(token, {bytes_of(kSessionKey), an, cn})};
}

}  // namespace

Expected<std::string, std::string> check_token(std::string_view text, std::string_view source) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  const std::string where(source);
  if (text.size() < kMinTokenChars || text.size() > kMaxTokenChars)
    return unexpected(where + ": the token must have " + std::to_string(kMinTokenChars) + " to " +
                      std::to_string(kMaxTokenChars) + " characters (it has " + std::to_string(text.size()) + ")");
  for (char c : text)
    if (!std::isgraph(static_cast<unsigned char>(c)))
      return unexpected(where + ": the token must be printable characters without spaces");
  return std::string(text);
}

Expected<std::string, std::string> read_token_file(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return unexpected("cannot open token file " + path);
  if ((st.st_mode & 077) != 0) return unexpected("token file " + path + " is readable by others: chmod 600 it");
  auto text = read_text_file(path);
  if (!text) return unexpected(text.error());
  return check_token(*text, path);
}

Mac hmac_sha256(std::string_view key, std::initializer_list<std::span<const uint8_t>> parts) {
  (void)sodium_ready();
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, reinterpret_cast<const unsigned char*>(key.data()), key.size());
  for (const auto& p : parts) crypto_auth_hmacsha256_update(&st, p.data(), p.size());
  Mac out{};
  crypto_auth_hmacsha256_final(&st, out.data());
  sodium_memzero(&st, sizeof st);
  return out;
}

std::string to_hex(std::span<const uint8_t> bytes) {
  std::string out(bytes.size() * 2 + 1, '\0');
  sodium_bin2hex(out.data(), out.size(), bytes.data(), bytes.size());
  out.pop_back();
  return out;
}

std::optional<Mac> mac_from_hex(std::string_view hex) {
  Mac out{};
  size_t len = 0;
  if (hex.size() != 2 * out.size() ||
      sodium_hex2bin(out.data(), out.size(), hex.data(), hex.size(), nullptr, &len, nullptr) != 0 || len != out.size())
    return std::nullopt;
  return out;
}

Mac SecureLine::line_mac(bool from_initiator, uint64_t seq, std::string_view text) const {
  std::array<uint8_t, 8> seq_be{};
  store_be<uint64_t>(reinterpret_cast<std::byte*>(seq_be.data()), seq);
  return hmac_sha256(std::string_view(reinterpret_cast<const char*>(key_.data()), key_.size()),
                     {bytes_of(from_initiator ? kFromInitiator : kFromAgent), seq_be, bytes_of(text)});
}

Expected<std::string, std::string> SecureLine::read_line(int timeout_ms) {
  auto line = conn_.read_line(timeout_ms);
  if (!line) return line;
  const size_t mac_hex = 2 * sizeof(Mac);
  const auto mac = line->size() > mac_hex && (*line)[mac_hex] == ' ' ? mac_from_hex(std::string_view(*line).substr(0, mac_hex))
                                                                     : std::nullopt;
  const std::string text = line->size() > mac_hex ? line->substr(mac_hex + 1) : std::string();
  if (!mac || !equal(*mac, line_mac(!initiator_, received_, text)))
    return unexpected(std::string("a control line failed its MAC check"));
  ++received_;
  return text;
}

Expected<void, std::string> SecureLine::write_line(std::string_view text) {
  const Mac mac = line_mac(initiator_, sent_++, text);
  return conn_.write_all(to_hex(mac) + " " + std::string(text) + "\n");
}

Expected<Mac, std::string> accept_handshake(LineConn& c, std::string_view token, int timeout_ms) {
  if (!sodium_ready()) return unexpected(std::string("libsodium did not start"));
  Nonce an{};
  randombytes_buf(an.data(), an.size());
  if (auto ok = c.write_all(std::string(kChallengeWord) + " " + to_hex(an) + "\n"); !ok) return unexpected(ok.error());
  auto line = c.read_line(timeout_ms);
  if (!line) return unexpected("no answer to the challenge: " + line.error());
  std::istringstream in(*line);
  std::string word, cn_hex, proof_hex, extra;
  Nonce cn{};
  size_t len = 0;
  std::string why;
  if (!(in >> word >> cn_hex >> proof_hex) || (in >> extra) || word != "AUTH") {
    why = "not an AUTH line";
  } else if (const auto proof = mac_from_hex(proof_hex);
             !proof || cn_hex.size() != 2 * cn.size() ||
             sodium_hex2bin(cn.data(), cn.size(), cn_hex.data(), cn_hex.size(), nullptr, &len, nullptr) != 0) {
    why = "malformed AUTH line";
  } else if (const Proofs p = proofs(token, an, cn); !equal(*proof, p.initiator)) {
    why = "wrong proof (another token)";
  } else {
    if (auto ok = c.write_all("OK " + to_hex(p.agent) + "\n"); !ok) return unexpected(ok.error());
    return p.session;
  }
  (void)c.write_all("ERR authentication failed\n");
  return unexpected(why);
}

Expected<Mac, std::string> initiate_handshake(LineConn& c, std::string_view token, int timeout_ms) {
  if (!sodium_ready()) return unexpected(std::string("libsodium did not start"));
  auto challenge = c.read_line(timeout_ms);
  if (!challenge) return unexpected("no challenge from the agent: " + challenge.error());
  const std::string_view word = kChallengeWord;
  Nonce an{}, cn{};
  size_t len = 0;
  if (challenge->size() != word.size() + 1 + 2 * an.size() || challenge->compare(0, word.size(), word) != 0 ||
      sodium_hex2bin(an.data(), an.size(), challenge->data() + word.size() + 1, 2 * an.size(), nullptr, &len, nullptr) != 0)
    return unexpected("not a phub-probe 2 agent (it said \"" + challenge->substr(0, 80) + "\")");
  randombytes_buf(cn.data(), cn.size());
  const Proofs p = proofs(token, an, cn);
  if (auto ok = c.write_all("AUTH " + to_hex(cn) + " " + to_hex(p.initiator) + "\n"); !ok) return unexpected(ok.error());
  auto answer = c.read_line(timeout_ms);
  if (!answer) return unexpected("no answer to AUTH: " + answer.error());
  if (answer->rfind("OK ", 0) != 0) return unexpected("the agent refused the token (" + *answer + ")");
  const auto agent_proof = mac_from_hex(std::string_view(*answer).substr(3));
  if (!agent_proof || !equal(*agent_proof, p.agent)) return unexpected(std::string("the agent's proof is wrong: it has another token"));
  return p.session;
}

}  // namespace phub::probe
