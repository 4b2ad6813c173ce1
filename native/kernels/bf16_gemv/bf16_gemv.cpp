// bf16_gemv (args.h): a bf16 linear layer for a few rows, reading the weight at memory speed.
//
// Why: at decode a linear layer is one pass over its weight, so its time is the weight's bytes over the read
// bandwidth. oneDNN's bf16 path through torch streamed a Qwen2-0.5B decode step's 988 MB of weights at ~0.79 of
// the 2-core read bandwidth (Xeon, AVX-512 BF16, no AMX); here each 16 weights are one load, a widening to
// float32 (a shift) and one FMA per row, well under the memory time.
//
// One output channel at a time: its weight row is read front to back, 64 k a step in four accumulators per row
// of x (one accumulator's FMA chain would bound the loop), against the rows' x widened to float32 once per call
// in a per-thread scratch, and summed across lanes at the end. Streaming 8 weight rows side by side (the first
// version) read at half the bandwidth on a Zen 4: 11-15 against 24-29 GB/s one row at a time at k = 896, where the
// rows are 1792 bytes apart (benchmarks/results/session53-bf16-gemv-streams-zen4.md); software prefetching on
// top of one stream made it slower.
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

// y[r, n] for rows r < MR of one output channel n; xf: the rows of x in float32, k16 floats apart (zeros past k).
template <int MR>
void channel(const Bf16GemvArgs& a, const float* xf, int64_t k16, int64_t n) {
    constexpr int U = runs_in_flight<MR>();
    V16 acc[MR][U];
    for (int r = 0; r < MR; ++r)
        for (int u = 0; u < U; ++u) acc[r][u] = v_zero();
    const uint16_t* w = a.w + n * a.k;
    int64_t k0 = 0;
    for (; k0 + 16 * U <= a.k; k0 += 16 * U)
        for (int u = 0; u < U; ++u) {
            const V16 wv = v_load(w + k0 + 16 * u);
            for (int r = 0; r < MR; ++r) acc[r][u] = v_fma(v_load(xf + r * k16 + k0 + 16 * u), wv, acc[r][u]);
        }
    for (; k0 + 16 <= a.k; k0 += 16) {
        const V16 wv = v_load(w + k0);
        for (int r = 0; r < MR; ++r) acc[r][0] = v_fma(v_load(xf + r * k16 + k0), wv, acc[r][0]);
    }
    const float b = a.bias ? a.bias[n] : 0.0f;
    for (int r = 0; r < MR; ++r) {
        V16 total = acc[r][0];
        for (int u = 1; u < U; ++u) total = v_add(total, acc[r][u]);
        float sum = v_sum(total);
        for (int64_t k = k0; k < a.k; ++k) sum += xf[r * k16 + k] * bf16_to_f32(w[k]);
        a.y[r * a.y_stride + n] = f32_to_bf16(sum + b);
    }
}

template <int MR>
void rows(const Bf16GemvArgs& a) {
    const int64_t k16 = (a.k + 15) / 16 * 16;
    const int64_t work = a.k * MR;
    parallel(a.n, work >= kMinMacsPerTask ? 1 : kMinMacsPerTask / work, a.threads, [&](int64_t begin, int64_t end) {
        float* xf = scratch_floats(MR * k16);
        for (int r = 0; r < MR; ++r) {
            bf16_row_to_f32(a.x + r * a.x_stride, xf + r * k16, a.k);
            for (int64_t k = a.k; k < k16; ++k) xf[r * k16 + k] = 0.0f;
        }
        for (int64_t n = begin; n < end; ++n) channel<MR>(a, xf, k16, n);
    }, stream_chunk(a.k * 2));
}

void bf16_gemv(const Bf16GemvArgs& a) {
    switch (a.m) {
        case 0: return;
        case 1: return rows<1>(a);
        case 2: return rows<2>(a);
        case 3: return rows<3>(a);
        default: return rows<4>(a);  // the binding refuses more than 4 rows
    }
}

}  // namespace

IPXC_REGISTER_KERNEL(bf16_gemv, bf16_gemv);

}  // namespace IPXC_NS
}  // namespace ipxc
