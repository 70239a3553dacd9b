// The agq value codec on the packet path: one chunk (16 or 32 lanes) at a
// time, straight from float32 into the frame's big-endian lanes and back,
// vectorised (AVX2: 8 lanes per step in double precision, so rounding and
// clipping are exact and bit-identical to the scalar reference agqc::encode /
// agqc::decode_sum, which the verifier and the tests keep using: the check
// never shares the code it checks).
#pragma once

#include <cstdint>

namespace agq::worker::fastc {

inline constexpr unsigned kMaxLanes = 32;

// Encodes x[0..n_valid) (the rest of the n_lanes lanes are 0, the tensor's
// padding) for a request of `width` bits with `guard` guard bits at
// `exponent`, into n_lanes big-endian 32-bit lanes at out (any alignment).
// Returns true if a value clipped (or was NaN/Inf): the DATA carries OVERFLOW.
bool encode_be(const float* x, unsigned n_valid, unsigned n_lanes, int width, int guard, int exponent,
               uint8_t* out);

// Decodes big-endian result lanes in[0..n_valid) of a sum of n values granted
// `granted` bits (d = request - granted) into out[0..n_valid) as float32,
// exactly float(agqc::decode_sum(...)). Returns max |out[k]|.
float decode_be(const uint8_t* in, unsigned n_valid, unsigned n, int granted, int guard, int exponent, int d,
                float* out);

// Error feedback (PROTOCOL.md §5): with x' = x[k] + r[k] the value that was
// encoded into our DATA lanes sent[k] and d the final RESULT's truncation,
// r[k] := x' - x_hat, x_hat = agqc::decoded_contribution(u_k, ...): what
// quantization, clipping and truncation removed from our contribution. A
// residual that is not finite (a NaN or Inf input) becomes 0.
void residual_be(const uint8_t* sent, const float* x, float* r, unsigned n_valid, int width, int guard, int exponent,
                 int d);

}  // namespace agq::worker::fastc
