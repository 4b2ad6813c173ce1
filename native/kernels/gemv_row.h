// gemv_row: the dot products of one weight row (float32, or bf16 bits widened as they are loaded) with up to 4 rows
// of float32 x, the row read once front to back: the decode GEMVs' inner loop (bf16_gemv, f32_gemv). Include after
// common.h and vec16.h.
//
// Why one row at a time, 64 k a step in four accumulators per row of x: one accumulator's FMA chain would bound
// the loop, and on a Zen 4 weight rows read side by side (1.8 KB apart) halved what a core reads, while a software
// prefetch on top of one stream slowed it (benchmarks/results/session53-bf16-gemv-streams-zen4.md).
#pragma once

#include "common.h"
#include "vec16.h"

namespace ipxc {
namespace IPXC_NS {
namespace gemv_row {

// Runs of 16 k in flight per row of x: rows x runs accumulators, plus a weight and an x vector, must fit the
// registers (AVX2: 16 ymm, two per V16).
template <int MR>
constexpr int runs_in_flight() {
#if IPXC_V16_AVX2
    return MR == 1 ? 4 : MR == 2 ? 2 : 1;
#else
    return 4;
#endif
}

// sums[r] = w[0 .. k) . x[r * x_stride + 0 .. k) for r < MR, summed in float32.
template <int MR, class WT>
static inline void dots(const WT* w, int64_t k, const float* x, int64_t x_stride, float* sums) {
    constexpr int U = runs_in_flight<MR>();
    V16 acc[MR][U];
    for (int r = 0; r < MR; ++r)
        for (int u = 0; u < U; ++u) acc[r][u] = v_zero();
    int64_t k0 = 0;
    for (; k0 + 16 * U <= k; k0 += 16 * U)
        for (int u = 0; u < U; ++u) {
            const V16 wv = v_load(w + k0 + 16 * u);
            for (int r = 0; r < MR; ++r) acc[r][u] = v_fma(v_load(x + r * x_stride + k0 + 16 * u), wv, acc[r][u]);
        }
    for (; k0 + 16 <= k; k0 += 16) {
        const V16 wv = v_load(w + k0);
        for (int r = 0; r < MR; ++r) acc[r][0] = v_fma(v_load(x + r * x_stride + k0), wv, acc[r][0]);
    }
    for (int r = 0; r < MR; ++r) {
        V16 total = acc[r][0];
        for (int u = 1; u < U; ++u) total = v_add(total, acc[r][u]);
        float sum = v_sum(total);
        for (int64_t i = k0; i < k; ++i) sum += x[r * x_stride + i] * load(w[i]);
        sums[r] = sum;
    }
}

}  // namespace gemv_row
}  // namespace IPXC_NS
}  // namespace ipxc
