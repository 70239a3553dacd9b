#include "control/text.hpp"

#include <charconv>

namespace agq::control {

std::optional<uint64_t> parse_uint(std::string_view s) {
  if (s.empty()) return std::nullopt;
  for (char c : s)
    if (c < '0' || c > '9') return std::nullopt;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<uint32_t> parse_ipv4(std::string_view s) {
  uint32_t ip = 0;
  for (int octet = 0; octet < 4; ++octet) {
    const size_t dot = s.find('.');
    const std::string_view part = octet == 3 ? s : s.substr(0, dot);
    if (octet < 3 && dot == std::string_view::npos) return std::nullopt;
    // At most three digits: rejects "0010" and keeps from_chars in range.
    if (part.size() > 3) return std::nullopt;
    auto v = parse_uint(part);
    if (!v || *v > 255) return std::nullopt;
    ip = ip << 8 | uint32_t(*v);
    if (octet < 3) s.remove_prefix(dot + 1);
  }
  return ip;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<proto::Mac> parse_mac(std::string_view s) {
  if (s.size() != 17) return std::nullopt;
  proto::Mac m{};
  for (int i = 0; i < 6; ++i) {
    const int hi = hex_digit(s[i * 3]), lo = hex_digit(s[i * 3 + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    if (i < 5 && s[i * 3 + 2] != ':') return std::nullopt;
    m[i] = uint8_t(hi << 4 | lo);
  }
  return m;
}

}  // namespace agq::control
