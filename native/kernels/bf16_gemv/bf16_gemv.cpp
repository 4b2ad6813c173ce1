// bf16_gemv (args.h): a bf16 linear layer for a few rows, reading the weight at memory speed.
//
// Why: at decode a linear layer is one pass over its weight, so its time is the weight's bytes over the read
// bandwidth. oneDNN's bf16 path through torch streamed a Qwen2-0.5B decode step's 988 MB of weights at ~0.79 of
// the 2-core read bandwidth (Xeon, AVX-512 BF16, no AMX); here each 16 weights are one load, a widening to
// float32 (a shift) and one FMA per row, well under the memory time.
//
// Two ways to read the weight, picked by the binding per CPU vendor (args.h rows_side_by_side): on Intel, blocks of
// 8 output channels whose weight rows stream side by side, 16 k a step, each prefetched 2 KiB ahead (a Xeon with
// AMX, 2 cores: 0.85-0.87 of the one-pass sum, one row at a time 0.69-0.72); elsewhere one output channel at a
// time, its weight row read front to back (gemv_row.h; on a Zen 4 rows side by side read at half the bandwidth).
// Either way x's rows are widened to float32 once per call in a per-thread scratch.
#include "common.h"
#include "vec16.h"
#include "gemv_row.h"

namespace ipxc {
namespace IPXC_NS {
namespace {

constexpr int64_t kMinMacsPerTask = 1 << 15;
constexpr int64_t kPrefetchAhead = 1024;  // bf16 values: 2 KiB (4 KiB measured the same)

// y[r, n0 + c] for c < CB, rows r < MR: CB weight rows side by side (the Intel way).
template <int MR, int CB>
void channel_block(const Bf16GemvArgs& a, const float* xf, int64_t k16, int64_t n0) {
    V16 acc[CB][MR];
    for (int c = 0; c < CB; ++c)
        for (int r = 0; r < MR; ++r) acc[c][r] = v_zero();
    const uint16_t* w[CB];
    for (int c = 0; c < CB; ++c) w[c] = a.w + (n0 + c) * a.k;
    int64_t k0 = 0;
    for (; k0 + 16 <= a.k; k0 += 16) {
        V16 xv[MR];
        for (int r = 0; r < MR; ++r) xv[r] = v_load(xf + r * k16 + k0);
        for (int c = 0; c < CB; ++c) {
            // A block's rows are one contiguous run of CB * k values, each row short (896 values: 28 lines): the
            // hardware prefetcher alone does not ramp up on such streams, so fetch 2 KiB ahead (into the next rows).
            if ((k0 & 31) == 0) __builtin_prefetch(w[c] + k0 + kPrefetchAhead);
            const V16 wv = v_load(w[c] + k0);
            for (int r = 0; r < MR; ++r) acc[c][r] = v_fma(xv[r], wv, acc[c][r]);
        }
    }
    for (int c = 0; c < CB; ++c) {
        const float b = a.bias ? a.bias[n0 + c] : 0.0f;
        for (int r = 0; r < MR; ++r) {
            float sum = v_sum(acc[c][r]);
            for (int64_t k = k0; k < a.k; ++k) sum += xf[r * k16 + k] * bf16_to_f32(w[c][k]);
            a.y[r * a.y_stride + n0 + c] = f32_to_bf16(sum + b);
        }
    }
}

// y[r, n] for rows r < MR of one output channel n; xf: the rows of x in float32, k16 floats apart (zeros past k).
template <int MR>
void channel(const Bf16GemvArgs& a, const float* xf, int64_t k16, int64_t n) {
    float sums[MR];
    gemv_row::dots<MR>(a.w + n * a.k, a.k, xf, k16, sums);
    const float b = a.bias ? a.bias[n] : 0.0f;
    for (int r = 0; r < MR; ++r) a.y[r * a.y_stride + n] = f32_to_bf16(sums[r] + b);
}

template <int MR>
void rows(const Bf16GemvArgs& a) {
    constexpr int CB = MR <= 2 ? 8 : 4;  // side by side: CB x MR accumulators, 16 or fewer (AVX2: 32 ymm)
    const int64_t cb = a.rows_side_by_side > 1 ? CB : 1;  // output channels a block
    const int64_t k16 = (a.k + 15) / 16 * 16;
    const int64_t blocks = (a.n + cb - 1) / cb;
    const int64_t work = cb * a.k * MR;
    parallel(blocks, work >= kMinMacsPerTask ? 1 : kMinMacsPerTask / work, a.threads, [&](int64_t begin, int64_t end) {
        float* xf = scratch_floats(MR * k16);
        for (int r = 0; r < MR; ++r) {
            bf16_row_to_f32(a.x + r * a.x_stride, xf + r * k16, a.k);
            for (int64_t k = a.k; k < k16; ++k) xf[r * k16 + k] = 0.0f;
        }
        for (int64_t blk = begin; blk < end; ++blk) {
            const int64_t n0 = blk * cb;
            if (cb == 1) {
                channel<MR>(a, xf, k16, n0);
            } else if (n0 + CB <= a.n) {
                channel_block<MR, CB>(a, xf, k16, n0);
            } else {
                for (int64_t c = n0; c < a.n; ++c) channel<MR>(a, xf, k16, c);
            }
        }
    }, stream_chunk(cb * a.k * 2));
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
