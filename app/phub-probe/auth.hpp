// The probe's control-channel authentication: a token that the coordinator and every agent share, a
// challenge-response handshake with HMAC-SHA-256 (libsodium) in which the token never crosses the wire, and a
// MAC with a sequence number on every line after it, so that lines cannot be forged, altered, replayed or
// reordered. Nothing is encrypted: the lines are readable on the wire.
//
//   agent -> initiator   PHUB-PROBE 2 CHALLENGE <an>                       an, cn: 32 random bytes, hex
//   initiator -> agent   AUTH <cn> <HMAC(token, "phub-probe 2 initiator" an cn)>
//   agent -> initiator   OK <HMAC(token, "phub-probe 2 agent" an cn)>   or "ERR authentication failed", close
//   then each line       <HMAC(k, dir seq text)> <text>     k = HMAC(token, "phub-probe 2 session" an cn),
//                        dir "i>a" or "a>i", seq a 64-bit big-endian count of the lines sent that way
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "net.hpp"
#include "phub/base/expected.hpp"

namespace phub::probe {

inline constexpr const char* kTokenEnv = "PHUB_PROBE_TOKEN";
inline constexpr size_t kMinTokenChars = 16, kMaxTokenChars = 256;
inline constexpr const char* kChallengeWord = "PHUB-PROBE 2 CHALLENGE";

using Mac = std::array<uint8_t, 32>;

// A token as given (file text or variable): surrounding whitespace is dropped; it must then be 16 to 256
// printable characters without spaces.
[[nodiscard]] Expected<std::string, std::string> check_token(std::string_view text, std::string_view source);
// The token from a file (which must not be readable by group or others).
[[nodiscard]] Expected<std::string, std::string> read_token_file(const std::string& path);

[[nodiscard]] Mac hmac_sha256(std::string_view key, std::initializer_list<std::span<const uint8_t>> parts);
[[nodiscard]] std::string to_hex(std::span<const uint8_t> bytes);
[[nodiscard]] std::optional<Mac> mac_from_hex(std::string_view hex);

// A connection after the handshake: every line carries its MAC. Does not own the connection.
class SecureLine {
 public:
  SecureLine(LineConn& conn, const Mac& key, bool initiator) : conn_(conn), key_(key), initiator_(initiator) {}
  // One line, its MAC checked against the next expected sequence number; an error on a bad MAC.
  [[nodiscard]] Expected<std::string, std::string> read_line(int timeout_ms);
  [[nodiscard]] Expected<void, std::string> write_line(std::string_view text);
  [[nodiscard]] LineConn& raw() { return conn_; }  // SINK's bulk bytes, which are not authenticated

 private:
  [[nodiscard]] Mac line_mac(bool from_initiator, uint64_t seq, std::string_view text) const;
  LineConn& conn_;
  Mac key_;
  bool initiator_;
  uint64_t sent_ = 0, received_ = 0;
};

// The agent's side: sends a challenge and checks the answer within `timeout_ms`. On failure it tells the
// peer "ERR authentication failed" and returns why; the caller closes the connection.
[[nodiscard]] Expected<Mac, std::string> accept_handshake(LineConn& c, std::string_view token, int timeout_ms);
// The coordinator's side (and a bulk sender's towards its peer agent): answers the challenge and checks the
// agent's own proof, so that a party without the token cannot pose as an agent either.
[[nodiscard]] Expected<Mac, std::string> initiate_handshake(LineConn& c, std::string_view token, int timeout_ms);

}  // namespace phub::probe
