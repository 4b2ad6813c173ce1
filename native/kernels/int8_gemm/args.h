// The argument struct(s) of the int8_gemm kernel(s) (see native/include/ipxc/kernels.h).
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"

namespace ipxc {

// int8_gemm: an exact uint8 x int8 GEMM for CPUs without VNNI, whose vpmaddubsw pair sums
// saturate (oneDNN's u8*s8 path there: off by ~0.2 relative). Activations minus their zero
// point and the weights are widened to int16 and multiplied with vpmaddwd into int32: exact
// for any codes while k < 2^16. Then, per output column n,
//   v = float(acc) * scales[n] + bias[n]      (scales[n] = x_scale * w_scale[n], folded by the caller)
//   v = max(v, 0) if relu
//   v = 0.5 v erfc(-v / sqrt 2) if gelu (the erf GELU, as the gelu kernel computes it)
//   v = v * col_multiplier[n] if given (the next layer's SmoothQuant factors, folded into this output)
// written as float32, as bf16 (round to nearest even), or as uint8/int8 codes
// clamp(nearbyint(fmaf(v, out_inv_scale, out_zero_point))).
// `w` is packed by the caller (ipexconvert/backends/cpu/kernels/_int8_gemm.pack_int8_weight): int16 [n16 / 16][k2 / 2][16][2]
// with n16 = n rounded up to 16 and k2 = k rounded up to 2, zero padded: for each pair of k and
// each block of 16 outputs, the 16 outputs' two weights side by side (one vpmaddwd operand pair).
enum class GemmOut : int { f32 = 0, bf16 = 1, u8 = 2, s8 = 3 };
struct Int8GemmArgs {
    const uint8_t* a = nullptr;      // [m, k], row r at a + r * a_stride
    int64_t a_stride = 0;
    int32_t a_zero_point = 0;
    const int16_t* w = nullptr;      // packed, see above
    int64_t m = 0, n = 0, k = 0;
    const float* scales = nullptr;   // n
    const float* bias = nullptr;     // optional, n
    bool relu = false;
    bool gelu = false;               // after the residual and relu (a transformer FFN's first layer)
    const float* col_multiplier = nullptr;  // optional, n: after the GELU
    void* y = nullptr;               // [m, n], row r at y + r * y_stride elements
    int64_t y_stride = 0;
    GemmOut out = GemmOut::f32;
    float out_inv_scale = 1.0f;
    int32_t out_zero_point = 0;
    int threads = 1;
    // Optional: a residual added after scale and bias, before relu: v += (r - r_zero_point) * r_scale
    // for uint8 r, v += r for float32 r; [m, n], row r at residual + r * residual_stride elements.
    const void* residual = nullptr;
    bool residual_u8 = false;
    int64_t residual_stride = 0;
    float residual_scale = 1.0f;
    int32_t residual_zero_point = 0;
    // Optional: the rows of `a` are a convolution's patches, gathered while widening (no im2col
    // buffer): a is a dense NHWC uint8 image [batch, in_h, in_w, channels], row r is output pixel
    // (b, oh, ow) and k runs over (kh, kw, channel); taps outside the image read the zero point
    // (they add nothing). m = batch * out_h * out_w, k = kh * kw * channels.
    bool conv = false;
    int64_t in_h = 0, in_w = 0, channels = 0, out_h = 0, out_w = 0;
    int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
    // int8_amx_gemm (the same arithmetic on AMX tiles: tdpbusd sums a * w, then subtracts a_zero_point * w_sums[n],
    // exact in int32) reads these instead of w: n and k multiples of 32 and 64, no conv. w_amx is int8
    // [n / 32][k / 64][16][32][4]: per block of 32 outputs and 64 k, 16 rows of k-quads, each row the 32 outputs'
    // quads side by side (amx_panels.h); w_sums[n] = sum_k w[n, k].
    const int8_t* w_amx = nullptr;
    const int32_t* w_sums = nullptr;
};

}  // namespace ipxc
