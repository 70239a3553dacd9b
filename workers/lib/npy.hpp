// Loads a float32 vector from a NumPy .npy file (little-endian '<f4',
// C order, any shape: flattened) or from a raw little-endian float32 file.
#pragma once

#include <string>
#include <vector>

namespace agq::worker {

// Returns false with `err` set if the file cannot be read or is not float32.
bool load_float32_file(const std::string& path, std::vector<float>& out, std::string& err);

// Writes a 1-D little-endian float32 .npy file.
bool save_float32_npy(const std::string& path, const std::vector<float>& v, std::string& err);

}  // namespace agq::worker
