// woq_gemm (args.h): float32 activations times weight-only quantized (int8 / int4) weights.
//
// Decode (a few rows) is bound by reading the weights, so the codes are turned into floats in
// registers and never stored: per group of k, acc = sum x * q is summed on the integer codes (exact
// as floats) and the group's scale and zero point are applied once at its end,
// y += scale * (acc - zero * sum x), with sum x per row and group computed once per call.
// Prefill (many rows) is bound by the FMAs, so each panel of output channels is dequantized once
// into a per-thread float32 scratch and panel_gemm.h's register-tiled micro-kernel runs it over
// a chunk of x's rows.
//
// The vector type V16 is the 16 channels of one packed block: one zmm, two ymm, or 16 floats at the
// generic level (plain loops gcc vectorises for SSE2), so one source serves every level.
#include "common.h"

#include "vec16.h"
#include "panel_gemm.h"

namespace ipxc {
namespace IPXC_NS {

// The codes of one packed block as V16 floats, and the register tiling per level.
#if IPXC_HAVE_AVX512
// 16 int8 codes as floats.
static inline V16 v_codes8(const int8_t* p) {
    return {_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))))};
}
// 16 bytes of two 4-bit codes each: the low nibbles (k even) and the high ones (k odd) as floats.
static inline void v_codes4(const uint8_t* p, V16& lo, V16& hi) {
    const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    lo = {_mm512_cvtepi32_ps(_mm512_and_si512(b, _mm512_set1_epi32(15)))};
    hi = {_mm512_cvtepi32_ps(_mm512_srli_epi32(b, 4))};
}
constexpr int kDecodeChains = 8;  // independent FMA chains to cover the FMA latency (2 ports x 4 cycles)
#elif IPXC_V16_AVX2
static inline V16 v_codes8(const int8_t* p) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)))};
}
static inline void v_codes4(const uint8_t* p, V16& lo, V16& hi) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m256i b0 = _mm256_cvtepu8_epi32(v), b1 = _mm256_cvtepu8_epi32(_mm_srli_si128(v, 8));
    const __m256i low = _mm256_set1_epi32(15);
    lo = {_mm256_cvtepi32_ps(_mm256_and_si256(b0, low)), _mm256_cvtepi32_ps(_mm256_and_si256(b1, low))};
    hi = {_mm256_cvtepi32_ps(_mm256_srli_epi32(b0, 4)), _mm256_cvtepi32_ps(_mm256_srli_epi32(b1, 4))};
}
constexpr int kDecodeChains = 4;  // x2 ymm per V16: 8 chains, and registers left for codes and x
#else
static inline V16 v_codes8(const int8_t* p) {
    V16 r;
    for (int j = 0; j < 16; ++j) r.f[j] = static_cast<float>(p[j]);
    return r;
}
static inline void v_codes4(const uint8_t* p, V16& lo, V16& hi) {
    for (int j = 0; j < 16; ++j) {
        lo.f[j] = static_cast<float>(p[j] & 15);
        hi.f[j] = static_cast<float>(p[j] >> 4);
    }
}
constexpr int kDecodeChains = 1;
#endif

constexpr int kBlock = 16;                    // output channels per packed block
constexpr int kSmallM = 4;                    // up to here the decode path
// Decode streams the codes once: prefetching this many 16-byte rows (2 KiB) ahead keeps more cache-line
// misses in flight than the hardware prefetcher does on its own (measured: benchmarks/results/session20-*).
constexpr int64_t kPrefetchRows = 128;
constexpr int64_t kMinMacsPerTask = 1 << 16;  // below this a task is not worth a thread

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Bytes of packed codes per block and per k (bits 4: half a byte).
static inline int64_t block_bytes(const WoqGemmArgs& g) { return g.bits == 8 ? g.k * kBlock : g.k / 2 * kBlock; }

// y[r, n0 .. n0 + cols) = v (+ bias), or += v when accumulate.
static inline void store_row(const WoqGemmArgs& g, int64_t row, int64_t n0, int64_t cols, const V16& v, bool accumulate) {
    float* y = g.y + row * g.y_stride + n0;
    alignas(64) float tmp[kBlock];
    v_store(tmp, v);
    for (int64_t j = 0; j < cols; ++j) {
        const float add = accumulate ? y[j] : (g.bias ? g.bias[n0 + j] : 0.0f);
        y[j] = tmp[j] + add;
    }
}

// ---- decode: the codes dequantized in registers ---------------------------------------------------

// One block of 16 channels for MR (<= 4) rows. U accumulators per row cover the FMA latency.
template <int MR, int BITS>
static void decode_block(const WoqGemmArgs& g, int64_t blk, const float* xsum) {
    constexpr int U = kDecodeChains / MR > 1 ? kDecodeChains / MR : 1;
    // bits 4: a byte row gives two k (two chains); with one chain per row (U 1) both go to the same
    // accumulator, as more would not fit the registers (AVX2, 4 rows: 8 x 2 ymm of 16).
    constexpr int U2 = U / 2 > 1 ? U / 2 : 1;
    constexpr int HI = U > 1 ? 1 : 0;  // accumulator offset of the high nibbles' k
    const int64_t gs = g.group_size, groups = g.k / gs;
    const float* qp = block_qparams(g, blk);
    const uint8_t* wb = static_cast<const uint8_t*>(g.w) + blk * block_bytes(g);
    const float* x[MR];
    for (int r = 0; r < MR; ++r) x[r] = g.x + r * g.x_stride;
    alignas(64) float total[MR][kBlock] = {};  // in memory: the registers go to the accumulators
    for (int64_t grp = 0; grp < groups; ++grp) {
        const int64_t k0 = grp * gs, k1 = k0 + gs;
        V16 acc[BITS == 8 ? U : (HI ? 2 * U2 : 1)][MR];
        for (auto& row : acc)
            for (auto& a : row) a = v_zero();
        if constexpr (BITS == 8) {
            const int8_t* w = reinterpret_cast<const int8_t*>(wb);
            int64_t k = k0;
            for (; k + U <= k1; k += U) {
                for (int u = 0; u < U; u += 4)  // one prefetch per 64-byte line (4 rows), however far U unrolls
                    if (((k + u) & 3) == 0) __builtin_prefetch(w + (k + u + kPrefetchRows) * kBlock);
                for (int u = 0; u < U; ++u) {
                    const V16 q = v_codes8(w + (k + u) * kBlock);
                    for (int r = 0; r < MR; ++r) acc[u][r] = v_fma(q, v_set1(x[r][k + u]), acc[u][r]);
                }
            }
            for (; k < k1; ++k) {
                const V16 q = v_codes8(w + k * kBlock);
                for (int r = 0; r < MR; ++r) acc[0][r] = v_fma(q, v_set1(x[r][k]), acc[0][r]);
            }
        } else {
            int64_t kk = k0 / 2;
            const int64_t kk1 = k1 / 2;
            for (; kk + U2 <= kk1; kk += U2) {
                for (int u = 0; u < U2; u += 4)
                    if (((kk + u) & 3) == 0) __builtin_prefetch(wb + (kk + u + kPrefetchRows) * kBlock);
                for (int u = 0; u < U2; ++u) {
                    V16 lo, hi;
                    v_codes4(wb + (kk + u) * kBlock, lo, hi);
                    for (int r = 0; r < MR; ++r) {
                        acc[HI * 2 * u][r] = v_fma(lo, v_set1(x[r][2 * (kk + u)]), acc[HI * 2 * u][r]);
                        acc[HI * (2 * u + 1)][r] = v_fma(hi, v_set1(x[r][2 * (kk + u) + 1]), acc[HI * (2 * u + 1)][r]);
                    }
                }
            }
            for (; kk < kk1; ++kk) {
                V16 lo, hi;
                v_codes4(wb + kk * kBlock, lo, hi);
                for (int r = 0; r < MR; ++r) {
                    acc[0][r] = v_fma(lo, v_set1(x[r][2 * kk]), acc[0][r]);
                    acc[HI][r] = v_fma(hi, v_set1(x[r][2 * kk + 1]), acc[HI][r]);
                }
            }
        }
        const V16 scale = v_load(group_scales(g, qp, grp));
        const V16 zero = v_load(group_zeros(g, qp, grp));
        for (int r = 0; r < MR; ++r) {
            V16 a = acc[0][r];
            for (int u = 1; u < static_cast<int>(sizeof acc / sizeof acc[0]); ++u) a = v_add(a, acc[u][r]);
            if (g.has_zero) a = v_fnma(zero, v_set1(xsum[r * groups + grp]), a);  // sum x * (q - zero)
            v_store(total[r], v_fma(scale, a, v_load(total[r])));
        }
    }
    const int64_t n0 = blk * kBlock, cols = min64(kBlock, g.n - n0);
    for (int r = 0; r < MR; ++r) store_row(g, r, n0, cols, v_load(total[r]), false);
    add_residual(g, 0, MR, n0, cols);
}

template <int BITS>
static void decode_block_rows(const WoqGemmArgs& g, int64_t blk, const float* xsum) {
    switch (g.m) {
        case 1: decode_block<1, BITS>(g, blk, xsum); break;
        case 2: decode_block<2, BITS>(g, blk, xsum); break;
        case 3: decode_block<3, BITS>(g, blk, xsum); break;
        default: decode_block<4, BITS>(g, blk, xsum); break;
    }
}

static void decode(const WoqGemmArgs& g) {
    const int64_t groups = g.k / g.group_size;
    const int64_t blocks = (g.n + kBlock - 1) / kBlock;
    // sum of x over each row's groups: the zero points' share, computed once for every block.
    float* xsum = nullptr;
    if (g.has_zero) {
        xsum = new float[static_cast<size_t>(g.m * groups)];  // bad_alloc reaches Python as MemoryError
        for (int64_t r = 0; r < g.m; ++r) {
            const float* x = g.x + r * g.x_stride;
            for (int64_t grp = 0; grp < groups; ++grp) {
                float s = 0.0f;
#pragma omp simd reduction(+ : s)
                for (int64_t k = grp * g.group_size; k < (grp + 1) * g.group_size; ++k) s += x[k];
                xsum[r * groups + grp] = s;
            }
        }
    }
    const int64_t work = g.k * kBlock * g.m;
    const int64_t grain = work >= kMinMacsPerTask ? 1 : kMinMacsPerTask / work;
    parallel(blocks, grain, g.threads, [&](int64_t begin, int64_t end) {
        for (int64_t blk = begin; blk < end; ++blk) {
            if (g.bits == 8)
                decode_block_rows<8>(g, blk, xsum);
            else
                decode_block_rows<4>(g, blk, xsum);
        }
    }, stream_chunk(g.k * kBlock * g.bits / 8));
    delete[] xsum;
}

// ---- prefill: dequantized panels through panel_gemm.h ------------------------------------------

using panel_gemm::kCB;
using panel_gemm::kNR;

// panel[(k - k0) * kNR + c] = W[n0 + c, k] for k in [k0, k0 + kc): exactly (q - zero) * scale.
// Blocks past the last one (a unit short of kCB blocks) are zeros.
static void dequantize_panel(const WoqGemmArgs& g, int64_t blk0, int64_t k0, int64_t kc, float* panel) {
    const int64_t gs = g.group_size, groups = g.k / gs;
    const int64_t blocks = (g.n + kBlock - 1) / kBlock;
    for (int c = 0; c < kCB; ++c) {
        const int64_t blk = blk0 + c;
        if (blk >= blocks) {
            for (int64_t k = 0; k < kc; ++k) v_store(panel + k * kNR + c * kBlock, v_zero());
            continue;
        }
        const float* qp = block_qparams(g, blk);
        const uint8_t* wb = static_cast<const uint8_t*>(g.w) + blk * block_bytes(g);
        int64_t k = k0;
        while (k < k0 + kc) {
            const int64_t grp = k / gs, end = min64((grp + 1) * gs, k0 + kc);
            const V16 scale = v_load(group_scales(g, qp, grp)), zero = v_load(group_zeros(g, qp, grp));
            if (g.bits == 8) {
                const int8_t* w = reinterpret_cast<const int8_t*>(wb);
                for (; k < end; ++k)
                    v_store(panel + (k - k0) * kNR + c * kBlock, v_mul(v_sub(v_codes8(w + k * kBlock), zero), scale));
            } else {
                for (; k < end; k += 2) {  // k, gs and kc are even for 4-bit codes
                    V16 lo, hi;
                    v_codes4(wb + (k / 2) * kBlock, lo, hi);
                    v_store(panel + (k - k0) * kNR + c * kBlock, v_mul(v_sub(lo, zero), scale));
                    v_store(panel + (k + 1 - k0) * kNR + c * kBlock, v_mul(v_sub(hi, zero), scale));
                }
            }
        }
    }
}

static void prefill(const WoqGemmArgs& g) {
    const auto fill = [&](int64_t n0, int64_t k0, int64_t kc, float* panel) { dequantize_panel(g, n0 / kBlock, k0, kc, panel); };
    const auto finish = [&](int64_t r_begin, int64_t r_end, int64_t n0, int64_t cols, const float* stage) {
        for (int64_t r = r_begin; r < r_end; ++r)
            panel_gemm::sums_plus_bias(stage + (r - r_begin) * kNR, g.bias, n0, cols, g.y + r * g.y_stride + n0);
        add_residual(g, r_begin, r_end, n0, cols);
    };
    panel_gemm::run(g.x, g.x_stride, {g.m, g.n, g.k, g.threads}, fill, finish);
}

static void woq_gemm(const WoqGemmArgs& g) {
    if (g.m <= 0 || g.n <= 0) return;
    const bool small = g.path == 1 || (g.path == 0 && g.m <= kSmallM);
    if (!small) {
        prefill(g);
        return;
    }
    // The decode path keeps up to 4 rows in registers: more rows run in slices of 4.
    for (int64_t r0 = 0; r0 < g.m; r0 += kSmallM) {
        WoqGemmArgs part = g;
        part.x = g.x + r0 * g.x_stride;
        part.y = g.y + r0 * g.y_stride;
        part.m = min64(kSmallM, g.m - r0);
        decode(part);
    }
}

IPXC_REGISTER_KERNEL(woq_gemm, woq_gemm);

}  // namespace IPXC_NS
}  // namespace ipxc
