// f32_gemv (args.h): a float32 linear layer for a few rows, reading the weight at memory speed.
//
// Why: at decode a linear layer is one pass over its weight, so its time is the weight's bytes over the read
// bandwidth. On AMD CPUs (where MKL does not run float32 linear here) oneDNN's float32 matmul read a Qwen2-0.5B
// decode step's 1976 MB of weights at ~0.65 of the 2-core read bandwidth on a Zen 4, 0.41 capped to AVX2.
// The loop is bf16_gemv's one-row-at-a-time way on float32 loads (gemv_row.h): one output channel at a time, its
// weight row read front to back.
#include "common.h"
#include "vec16.h"
#include "gemv_row.h"

namespace ipxc {
namespace IPXC_NS {
namespace {

constexpr int64_t kMinMacsPerTask = 1 << 15;

// y[r, n] for rows r < MR of one output channel n.
template <int MR>
void channel(const F32GemvArgs& a, int64_t n) {
    float sums[MR];
    gemv_row::dots<MR>(a.w + n * a.k, a.k, a.x, a.x_stride, sums);
    const float b = a.bias ? a.bias[n] : 0.0f;
    for (int r = 0; r < MR; ++r) a.y[r * a.y_stride + n] = sums[r] + b;
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
