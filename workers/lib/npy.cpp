#include "lib/npy.hpp"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>

namespace agq::worker {

namespace {

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// Parses the header dict of a .npy file (versions 1..3) and returns the
// offset of the data; only what we need is checked: dtype and order.
bool npy_data_offset(const std::string& bytes, size_t& off, std::string& err) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) {
    err = "not a .npy file (bad magic)";
    return false;
  }
  const int major = uint8_t(bytes[6]);
  size_t hlen, hstart;
  if (major == 1) {
    hlen = uint8_t(bytes[8]) | uint8_t(bytes[9]) << 8;
    hstart = 10;
  } else {
    if (bytes.size() < 12) { err = "truncated .npy header"; return false; }
    hlen = uint32_t(uint8_t(bytes[8])) | uint32_t(uint8_t(bytes[9])) << 8 |
           uint32_t(uint8_t(bytes[10])) << 16 | uint32_t(uint8_t(bytes[11])) << 24;
    hstart = 12;
  }
  if (hstart + hlen > bytes.size()) { err = "truncated .npy header"; return false; }
  const std::string hdr = bytes.substr(hstart, hlen);
  if (hdr.find("'<f4'") == std::string::npos && hdr.find("\"<f4\"") == std::string::npos) {
    err = "dtype is not little-endian float32 ('<f4'): " + hdr;
    return false;
  }
  if (hdr.find("'fortran_order': True") != std::string::npos) {
    err = "Fortran-order arrays are not supported";
    return false;
  }
  off = hstart + hlen;
  return true;
}

}  // namespace

bool load_float32_file(const std::string& path, std::vector<float>& out, std::string& err) {
  std::ifstream f(path, std::ios::binary);
  if (!f) { err = "cannot open " + path; return false; }
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t off = 0;
  if (ends_with(path, ".npy") && !npy_data_offset(bytes, off, err)) {
    err = path + ": " + err;
    return false;
  }
  const size_t n = (bytes.size() - off) / 4;
  if ((bytes.size() - off) % 4 != 0) { err = path + ": size is not a multiple of 4 bytes"; return false; }
  out.resize(n);
  std::memcpy(out.data(), bytes.data() + off, n * 4);  // x86: host order is little-endian
  return true;
}

bool save_float32_npy(const std::string& path, const std::vector<float>& v, std::string& err) {
  std::string hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(v.size()) + ",), }";
  // Version 1.0: magic(6) + version(2) + len(2) + header padded with spaces
  // and ended by '\n' so the data starts on a 64-byte boundary.
  const size_t total = 10 + hdr.size() + 1;
  hdr.append((64 - total % 64) % 64, ' ');
  hdr += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) { err = "cannot write " + path; return false; }
  const char pre[8] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  f.write(pre, 8);
  const char len[2] = {char(hdr.size() & 0xFF), char(hdr.size() >> 8)};
  f.write(len, 2);
  f.write(hdr.data(), std::streamsize(hdr.size()));
  f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * 4));
  if (!f) { err = "write error on " + path; return false; }
  return true;
}

}  // namespace agq::worker
