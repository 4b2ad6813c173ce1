// bf16_amx_gemm (args.h): a bf16 linear layer on AMX tiles for the row counts where oneDNN's matmul streams the
// weight slowly, on the panel loop the AMX GEMMs share (amx_panels.h: tdpbf16ps, each 32-channel panel's weight
// read from memory once a call while every row passes over it, the next panel prefetched meanwhile). BERT-base's 48
// encoder linears at 128 rows (170 MB of bf16 weights, more than the L3 holds): 0.71 x oneDNN's time on 2 cores of
// an AMX Xeon, 0.72 at 1024 rows (benchmarks/amx_gemm.py, session 68). The epilogue adds the bias, applies the
// unary and rounds 32 columns to bf16 with one vcvtne2ps2bf16.
#include "common.h"

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AMX_INT8__)
#include <immintrin.h>

#include "amx_panels.h"
#include "gelu_erf16.h"

namespace ipxc {
namespace IPXC_NS {
namespace {

inline __m512 apply_unary(int unary, __m512 v) {
    if (unary == 1) return _mm512_max_ps(_mm512_setzero_ps(), v);  // maxps returns its second operand for NaN: kept
    if (unary == 2) return gelu_erf16(v);
    return v;
}

// The float32 sums of rows [r0, r0 + rows) x channels [n0, n0 + 32) (c: 32 rows of 32, 128 bytes apart) plus
// bias, through the unary, rounded to bf16 into y.
void store_rows(const Bf16AmxGemmArgs& a, const float* c, int64_t r0, int64_t rows, int64_t n0) {
    const __m512 b0 = a.bias ? _mm512_loadu_ps(a.bias + n0) : _mm512_setzero_ps();
    const __m512 b1 = a.bias ? _mm512_loadu_ps(a.bias + n0 + 16) : _mm512_setzero_ps();
    for (int64_t r = 0; r < rows; ++r) {
        const __m512 v0 = apply_unary(a.unary, _mm512_add_ps(_mm512_load_ps(c + r * 32), b0));
        const __m512 v1 = apply_unary(a.unary, _mm512_add_ps(_mm512_load_ps(c + r * 32 + 16), b1));
        _mm512_storeu_si512(a.y + (r0 + r) * a.y_stride + n0, (__m512i)_mm512_cvtne2ps_pbh(v1, v0));
    }
}

void bf16_amx_gemm(const Bf16AmxGemmArgs& a) {
    amx_panel_gemm<AmxProduct::bf16>(
        reinterpret_cast<const uint8_t*>(a.x), a.x_stride * 2, a.m, a.n / 32, a.k / 32,
        reinterpret_cast<const uint8_t*>(a.w), a.threads, [&](const void* sums, int64_t r0, int64_t rows, int64_t p) {
            store_rows(a, static_cast<const float*>(sums), r0, rows, p * 32);
        });
}

}  // namespace

IPXC_REGISTER_KERNEL(bf16_amx_gemm, bf16_amx_gemm);

}  // namespace IPXC_NS
}  // namespace ipxc
#endif
