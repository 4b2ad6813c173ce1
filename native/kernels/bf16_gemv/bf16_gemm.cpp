// bf16_gemm (args.h): a bf16 linear layer for many rows (a prompt) on CPUs without bf16 arithmetic, from the
// same plain [n, k] bf16 weight bf16_gemv reads for decode: nothing is repacked or kept in float32.
//
// Why: below avx512_bf16 oneDNN and torch emulate bf16 GEMM at several times the float32 time, and widening the
// weight to float32 per call (a copy of the whole weight, or blocks of it handed to MKL) cost 1.12-1.6x the
// float32 artifact's packed MKL on a Qwen2-0.5B prompt. Here each panel of 16 or 32 output channels is widened
// in the panel fill itself (one 16 x 16 transpose of bf16 pairs per 32 k, into panel_gemm.h's per-thread scratch)
// and the FMA micro-kernel runs it over the rows; sums in float32, the node's SiLU / residual add / SwiGLU mul
// applied to them, y rounded to bf16 once (round to nearest even, subnormals kept, NaN quiet).
#include "common.h"
#include "vec16.h"
#include "panel_gemm.h"

namespace ipxc {
namespace IPXC_NS {
namespace {

using panel_gemm::kCB;
using panel_gemm::kNR;

// panel[(k - k0) * kNR + c] = W[n0 + c, k] as float32, k in [k0, k0 + kc); channels past n zeros.
void widen_panel(const Bf16GemvArgs& a, int64_t n0, int64_t k0, int64_t kc, float* panel) {
    for (int b = 0; b < kCB; ++b) {
        const int64_t c0 = n0 + b * 16;
        float* dst = panel + b * 16;
        const uint16_t* w = a.w + c0 * a.k + k0;
        if (c0 + 16 > a.n) {  // the last, partial block (or one wholly past n)
            for (int64_t k = 0; k < kc; ++k)
                for (int j = 0; j < 16; ++j) dst[k * kNR + j] = c0 + j < a.n ? bf16_to_f32(w[j * a.k + k]) : 0.0f;
            continue;
        }
        int64_t k = 0;
        for (; k + 32 <= kc; k += 32) {  // 16 channels x 16 pairs of k: one transpose of 32-bit pairs for 32 k
            V16 m[16];
            for (int j = 0; j < 16; ++j) m[j] = v_load_pairs(w + j * a.k + k);
            v_transpose_16x16(m);  // m[i]: the pair (k + 2i, k + 2i + 1) of each of the 16 channels
            for (int i = 0; i < 16; ++i) {
                v_store(dst + (k + 2 * i) * kNR, v_pairs_low(m[i]));
                v_store(dst + (k + 2 * i + 1) * kNR, v_pairs_high(m[i]));
            }
        }
        for (; k + 16 <= kc; k += 16) {  // 16 channels x 16 k, transposed to 16 k-rows of 16 channels
            V16 m[16];
            for (int j = 0; j < 16; ++j) m[j] = v_load(w + j * a.k + k);
            v_transpose_16x16(m);
            for (int j = 0; j < 16; ++j) v_store(dst + (k + j) * kNR, m[j]);
        }
        for (; k < kc; ++k)
            for (int j = 0; j < 16; ++j) dst[k * kNR + j] = bf16_to_f32(w[j * a.k + k]);
    }
}

// A row of the layer's float32 outputs (bias added) through the epilogue: the node's SiLU, residual add or SwiGLU
// mul in the GEMM's own threads, on values still in cache, and one rounding after them (the same formula as the
// silu kernel's), where torch ran each over the bf16 output again (~5 ms of a 512 x 4864 gate and up on Zen 1).
void epilogue(const Bf16GemvArgs& a, int64_t r, int64_t n0, int64_t cols, float* row) {
    if (a.silu)
        for (int64_t j = 0; j < cols; ++j) row[j] = row[j] / (1.0f + exp_approx(-row[j]));
    if (a.operand == nullptr) return;
    const uint16_t* operand = a.operand + r * a.n + n0;
    if (a.operand_kind == 1)
        for (int64_t j = 0; j < cols; ++j) row[j] += bf16_to_f32(operand[j]);
    else
        for (int64_t j = 0; j < cols; ++j) row[j] *= bf16_to_f32(operand[j]);
}

void bf16_gemm(const Bf16GemvArgs& a) {
    const auto fill = [&](int64_t n0, int64_t k0, int64_t kc, float* panel) { widen_panel(a, n0, k0, kc, panel); };
    const bool plain = !a.silu && a.operand == nullptr;
    const auto finish = [&](int64_t r_begin, int64_t r_end, int64_t n0, int64_t cols, const float* stage) {
        alignas(64) float row[kNR];
        for (int64_t r = r_begin; r < r_end; ++r) {
            const float* sums = stage + (r - r_begin) * kNR;
            if (plain && !a.bias) {
                f32_row_to_bf16(sums, a.y + r * a.y_stride + n0, cols);
                continue;
            }
            panel_gemm::sums_plus_bias(sums, a.bias, n0, cols, row);
            if (!plain) epilogue(a, r, n0, cols, row);
            f32_row_to_bf16(row, a.y + r * a.y_stride + n0, cols);
        }
    };
    panel_gemm::run(a.x, a.x_stride, {a.m, a.n, a.k, a.threads}, fill, finish);
}

}  // namespace

IPXC_REGISTER_KERNEL(bf16_gemm, bf16_gemm);

}  // namespace IPXC_NS
}  // namespace ipxc
