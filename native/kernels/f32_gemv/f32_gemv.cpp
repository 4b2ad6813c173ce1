// f32_gemv (args.h): a float32 linear layer for a few rows, reading the weight at memory speed.
//
// Why: at decode a linear layer is one pass over its weight, so its time is the weight's bytes over the read
// bandwidth. On AMD CPUs (where MKL does not run float32 linear here) oneDNN's float32 matmul read a Qwen2-0.5B
// decode step's 1976 MB of weights at ~0.65 of the 2-core read bandwidth on a Zen 4, 0.41 capped to AVX2.
// The loop is bf16_gemv's one-row-at-a-time way on float32 loads: one output channel at a time, its weight row
// read front to back, 64 k a step in four accumulators per row of x (one accumulator's FMA chain would bound the
// loop), summed across lanes at the end (benchmarks/results/session53-bf16-gemv-streams-zen4.md: weight rows read
// side by side halve what a Zen 4 core reads).
#include "common.h"
#include "vec16.h"

namespace ipxc {
namespace IPXC_NS {
namespace {

constexpr int64_t kMinMacsPerTask = 1 << 15;

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

// y[r, n] for rows r < MR of one output channel n.
template <int MR>
void channel(const F32GemvArgs& a, int64_t n) {
    constexpr int U = runs_in_flight<MR>();
    V16 acc[MR][U];
    for (int r = 0; r < MR; ++r)
        for (int u = 0; u < U; ++u) acc[r][u] = v_zero();
    const float* w = a.w + n * a.k;
    int64_t k0 = 0;
    for (; k0 + 16 * U <= a.k; k0 += 16 * U)
        for (int u = 0; u < U; ++u) {
            const V16 wv = v_load(w + k0 + 16 * u);
            for (int r = 0; r < MR; ++r)
                acc[r][u] = v_fma(v_load(a.x + r * a.x_stride + k0 + 16 * u), wv, acc[r][u]);
        }
    for (; k0 + 16 <= a.k; k0 += 16) {
        const V16 wv = v_load(w + k0);
        for (int r = 0; r < MR; ++r) acc[r][0] = v_fma(v_load(a.x + r * a.x_stride + k0), wv, acc[r][0]);
    }
    const float b = a.bias ? a.bias[n] : 0.0f;
    for (int r = 0; r < MR; ++r) {
        V16 total = acc[r][0];
        for (int u = 1; u < U; ++u) total = v_add(total, acc[r][u]);
        float sum = v_sum(total);
        for (int64_t k = k0; k < a.k; ++k) sum += a.x[r * a.x_stride + k] * w[k];
        a.y[r * a.y_stride + n] = sum + b;
    }
}

template <int MR>
void rows(const F32GemvArgs& a) {
    const int64_t work = a.k * MR;
    parallel(a.n, work >= kMinMacsPerTask ? 1 : kMinMacsPerTask / work, a.threads, [&](int64_t begin, int64_t end) {
        for (int64_t n = begin; n < end; ++n) channel<MR>(a, n);
    }, stream_chunk(a.k * 4));
}

void f32_gemv(const F32GemvArgs& a) {
    switch (a.m) {
        case 0: return;
        case 1: return rows<1>(a);
        case 2: return rows<2>(a);
        case 3: return rows<3>(a);
        default: return rows<4>(a);  // the binding refuses more than 4 rows
    }
}

}  // namespace

IPXC_REGISTER_KERNEL(f32_gemv, f32_gemv);

}  // namespace IPXC_NS
}  // namespace ipxc
