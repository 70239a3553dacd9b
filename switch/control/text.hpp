// Strict parsers for the values an operator types: shared by the
// configuration file and the control socket, so both accept the same
// spellings and reject the same typos.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "proto/headers.hpp"
#include "tna/intrinsic.hpp"

namespace agq::control {

// Dotted quad, exactly four decimal octets ("10.2.2.1").
std::optional<uint32_t> parse_ipv4(std::string_view s);
// Exactly six two-digit hex octets separated by ':' ("02:00:00:00:00:01").
// proto::mac_from_string is sscanf-based and accepts "2:0:0:0:0:1" or signs;
// operators should get an error for those, not a surprising MAC.
std::optional<proto::Mac> parse_mac(std::string_view s);
// Decimal digits only, no sign, no overflow.
std::optional<uint64_t> parse_uint(std::string_view s);

// Largest usable port number: 0xFFFF is tna::kNoPort.
inline constexpr uint64_t kMaxPortId = tna::kNoPort - 1;

}  // namespace agq::control
