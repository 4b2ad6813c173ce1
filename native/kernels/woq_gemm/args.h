// The argument struct of the woq_gemm kernel (see native/include/ipxc/kernels.h).
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"

namespace ipxc {

// woq_gemm: y[m, n] = x[m, k] . dequant(W)^T + bias, float32 in and out, for weight-only quantized
// linear layers (ir/ops/woq_linear.py). W's codes are int8 (bits 8) or unsigned 4-bit (bits 4), one
// scale and one zero point per output channel and group of `group_size` consecutive k:
//   W[n, k] = (q[n, k] - zero[n, g]) * scale[n, g],  g = k / group_size
// (symmetric int8 has zero 0; symmetric int4 stores its codes +8, so zero 8).
//
// Packed layout (made once at load by ipexconvert/backends/cpu/kernels/woq_linear.pack_woq_weight):
// output channels in blocks of 16, n16 = n rounded up to 16, the padding channels all zero.
//   bits 8: w is int8 [n16 / 16][k][16]: for each k the 16 channels' codes side by side, so one
//           16-byte load is one code per channel of the block;
//   bits 4: w is uint8 [n16 / 16][k / 2][16]: byte j of row kk holds channel j's codes of k = 2kk (low
//           nibble) and k = 2kk + 1 (high nibble), as the artifact's [n, k / 2] bytes, transposed per block.
//   qparams is float32 [n16 / 16][groups][2][16]: per block and group, the 16 scales, then the 16
//           zero points as floats (padding channels: scale 0, zero 0); or, for symmetric codes, float32
//           [n16 / 16][groups][1][16], the scales alone (qparam_planes 1), every zero point the symmetric
//           one: 8 for 4-bit codes, 0 for int8 (a decode step then streams 4 bytes fewer per channel and
//           group: 5.6 % of an int4 g128 layer's bytes).
//
// Two regimes (path 0 picks by m):
//   m <= 4 (decode, path 1): the codes are converted in registers and every weight byte is read once
//     per call: per group acc[r] = sum_k x[r, k] * q[n, k], then y += scale * (acc - zero * sum_k x[r, k]);
//   m > 4 (prefill, path 2): per task a panel of 16 (AVX2) or 32 (AVX-512) output channels times a
//     chunk of k is dequantized into a per-thread float32 scratch (exactly (q - zero) * scale, as the
//     reference), then a register-tiled FMA micro-kernel runs it over every row of x.
// Parallel over blocks of output channels (and row chunks when there are few blocks).
// Path 3 (woq_gemv_i8.cpp, AVX2 and up, 4-bit weights only; never chosen by path 0): the decode
// path with each row of x quantized to int8 first and integer dot products (vpmaddubsw). Faster
// where int4 decode is compute-bound, but numerically different: it adds x's rounding error.
// Path 4 (woq_gemm_w8a8.cpp, AVX2 and AVX-512 VNNI, 8-bit weights only, every m): x rounded to int8
// per row, integer dot products; its codes are packed in k-quads, int8 [n16 / 16][k / 4][16][4]
// (k and group_size multiples of 4), which only path 4 reads.
// Path 5 (woq_gemm_w4a8.cpp, AVX-512 VNNI, 4-bit weights, every m): the same on 4-bit codes packed in
// k-octets, uint8 [n16 / 16][k / 8][16][4], byte b of channel c's lane = code(8o + b) | code(8o + 4 + b) << 4
// (k and group_size multiples of 8), which only path 5 reads.
struct WoqGemmArgs {
    const float* x = nullptr;         // [m, k], row r at x + r * x_stride
    int64_t x_stride = 0;
    int64_t m = 0, n = 0, k = 0;
    int bits = 8;                     // 8 or 4
    int64_t group_size = 0;           // divides k (and is even for bits 4)
    const void* w = nullptr;          // packed codes, see above
    const float* qparams = nullptr;   // packed scales and zero points, see above
    int qparam_planes = 2;            // 2: scales then zero points; 1: scales only, symmetric zero points
    bool has_zero = false;            // false: every zero point is 0 (symmetric int8), the zero term is skipped
    const float* bias = nullptr;      // optional, n
    float* y = nullptr;               // [m, n], row r at y + r * y_stride
    const float* residual = nullptr;  // optional [m, n], row r at residual + r * n: y = (x . W^T + bias) + residual
    int64_t y_stride = 0;
    int path = 0;                     // 0: by m; 1: decode; 2: prefill; 3: decode on int8-quantized x (woq_gemv_i8);
                                      // 4: int8 weights in k-quads x int8-quantized x (woq_gemm_w8a8);
                                      // 5: 4-bit weights in k-octets x int8-quantized x (woq_gemm_w4a8)
    int threads = 1;
};

// Block blk's qparams: groups x qparam_planes x 16 floats.
inline const float* block_qparams(const WoqGemmArgs& g, int64_t blk) {
    return g.qparams + blk * (g.k / g.group_size) * g.qparam_planes * 16;
}

// The 16 scales of group grp in a block's qparams.
inline const float* group_scales(const WoqGemmArgs& g, const float* qp, int64_t grp) {
    return qp + grp * g.qparam_planes * 16;
}

// The zero point of 16 channels when qparams holds scales only (symmetric 4-bit codes are stored + 8; int8 codes
// as they are). Namespace-scope constexpr: internal linkage, a copy per object (a static local of this shared
// inline header would be one symbol across the ISA levels' objects).
alignas(64) constexpr float kSymmetricZeros4[16] = {8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8};
alignas(64) constexpr float kSymmetricZeros8[16] = {};

// The 16 zero points of group grp in a block's qparams, or the symmetric ones when qparams holds scales only.
inline const float* group_zeros(const WoqGemmArgs& g, const float* qp, int64_t grp) {
    if (g.qparam_planes == 2) return qp + grp * 32 + 16;
    return g.bits == 4 ? kSymmetricZeros4 : kSymmetricZeros8;
}

// y[r, n0 .. n0 + cols) += residual for rows [r_begin, r_end): every path calls it after its last store of those
// outputs, so y = (x . W^T + bias) + residual as the op's reference adds them.
inline void add_residual(const WoqGemmArgs& g, int64_t r_begin, int64_t r_end, int64_t n0, int64_t cols) {
    if (g.residual == nullptr) return;
    for (int64_t r = r_begin; r < r_end; ++r) {
        float* y = g.y + r * g.y_stride + n0;
        const float* add = g.residual + r * g.n + n0;
        for (int64_t j = 0; j < cols; ++j) y[j] += add[j];
    }
}

}  // namespace ipxc
