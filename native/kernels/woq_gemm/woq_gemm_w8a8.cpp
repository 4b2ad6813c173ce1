// woq_gemm_w8a8 (args.h, path 4): int8 weights times rows of x rounded to int8, every row count, in
// integer dot products. The layer's meaning is woq_linear's `activations: int8` (x rounded per row,
// xs = max|x| / 127), so the result is the reference's to float32 rounding of the final scaling only.
//
// Why: the float decode path spends 3 instructions per 16 weight bytes (widen, convert, FMA) and is
// compute-bound at about half the DRAM bandwidth of 2 cores; here 64 bytes of codes take 1-2
// instructions (VNNI) or 32 bytes take 4 (AVX2), so decode streams the weights at memory speed, and
// prefill runs int8 MACs (64 a VNNI instruction) on a block of weights held in L1/L2 across rows.
//
// Packed layout (pack_woq_weight with quads): int8 [n16 / 16][k / 4][16][4]: for each 4 consecutive k
// the 16 channels' codes, a channel's 4 codes side by side (one 32-bit lane: the VNNI operand shape).
// Codes are in [-127, 127] (the op's symmetric range: negating one never overflows).
//
// AVX-512 VNNI: vpdpbusd multiplies unsigned by signed bytes, so x goes in offset, u = xq + 128
// (1..255): sum u * w = sum xq * w + 128 * sum w, and sum w comes from a second vpdpbusd with a
// vector of ones, once per weight vector whatever the row count.
// AVX2: vpmaddubsw (unsigned x signed bytes, pairs summed into int16 with saturation) with the sign
// trick: |xq| times w with xq's sign moved onto w (vpsignb); a pair is at most 2 * 127 * 127 = 32258,
// exact in int16; vpmaddwd with ones widens the pairs into 32-bit lanes of 4 products.
// Per group: acc = sum xq * w, exact in int32; y += scale * xs * acc in float32.
#include <immintrin.h>

#include <cstring>

#include "common.h"
#include "amx_tiles.h"
#include "woq_gemm/int8_rows.h"

namespace ipxc {
namespace IPXC_NS {

constexpr int kBlock = 16;          // output channels per packed block
constexpr int64_t kQuadBytes = 64;  // one k-quad of a block: 16 channels x 4 codes
constexpr int64_t kPrefetchQuads = 32;  // 2 KiB ahead, as woq_gemm.cpp's decode
constexpr int64_t kMinMacsPerTask = 1 << 16;
constexpr int64_t kPanelRows = 32;  // prefill rows whose int8 codes stay in L1/L2 across the blocks (32 x 4864 = 156 KB): 16 / 24 / 32 / 64 / 128 measured, 32 best

#if defined(__AVX512VNNI__)
constexpr int kChains = 2;  // quads unrolled: independent accumulators per row

// acc[r] (16 channels, int32) += sum over the group's quads of xq[r] . w, exactly. The 128 * sum w that the
// offset codes add comes from `offset` (computed once per block for all its rows) or, when null, from a
// vpdpbusd with ones alongside (a single pass over the codes: decode).
template <int MR>
static void group_dots(const int8_t* w, int64_t quads, const uint8_t* const* xu, int64_t q0, __m512i* acc,
                       const __m512i* offset_of_rows) {
    const bool sums = offset_of_rows == nullptr;
    const __m512i ones = _mm512_set1_epi8(1);
    __m512i dot[MR][kChains], wsum[kChains];
    for (int u = 0; u < kChains; ++u) {
        wsum[u] = _mm512_setzero_si512();
        for (int r = 0; r < MR; ++r) dot[r][u] = _mm512_setzero_si512();
    }
    int64_t q = 0;
    for (; q + kChains <= quads; q += kChains) {
        for (int u = 0; u < kChains; ++u) {
            __builtin_prefetch(w + (q + u + kPrefetchQuads) * kQuadBytes);  // a quad is one 64-byte line
            const __m512i wv = _mm512_loadu_si512(w + (q + u) * kQuadBytes);
            if (sums) wsum[u] = _mm512_dpbusd_epi32(wsum[u], ones, wv);
            for (int r = 0; r < MR; ++r) {
                int32_t x4;
                std::memcpy(&x4, xu[r] + 4 * (q0 + q + u), sizeof x4);
                dot[r][u] = _mm512_dpbusd_epi32(dot[r][u], _mm512_set1_epi32(x4), wv);
            }
        }
    }
    for (; q < quads; ++q) {
        const __m512i wv = _mm512_loadu_si512(w + q * kQuadBytes);
        if (sums) wsum[0] = _mm512_dpbusd_epi32(wsum[0], ones, wv);
        for (int r = 0; r < MR; ++r) {
            int32_t x4;
            std::memcpy(&x4, xu[r] + 4 * (q0 + q), sizeof x4);
            dot[r][0] = _mm512_dpbusd_epi32(dot[r][0], _mm512_set1_epi32(x4), wv);
        }
    }
    __m512i offset;
    if (sums) {
        __m512i ws = wsum[0];
        for (int u = 1; u < kChains; ++u) ws = _mm512_add_epi32(ws, wsum[u]);
        offset = _mm512_slli_epi32(ws, 7);  // 128 * sum w
    } else {
        offset = *offset_of_rows;
    }
    for (int r = 0; r < MR; ++r) {
        __m512i d = dot[r][0];
        for (int u = 1; u < kChains; ++u) d = _mm512_add_epi32(d, dot[r][u]);
        acc[r] = _mm512_sub_epi32(d, offset);
    }
}

// y[r, 16 channels] += scale * xs[r] * acc[r]
template <int MR>
static void scale_into(const float* scale, const float* xs, const __m512i* acc, float (*total)[kBlock]) {
    const __m512 s = _mm512_loadu_ps(scale);
    for (int r = 0; r < MR; ++r) {
        const __m512 t = _mm512_loadu_ps(total[r]);
        _mm512_storeu_ps(total[r], _mm512_fmadd_ps(_mm512_mul_ps(s, _mm512_set1_ps(xs[r])), _mm512_cvtepi32_ps(acc[r]), t));
    }
}
using Acc = __m512i;

// 128 * sum w of each group of one block, for group_dots of every row quad after the first.
static void block_offsets(const int8_t* wb, int64_t groups, int64_t quads, __m512i* offsets) {
    const __m512i ones = _mm512_set1_epi8(1);
    for (int64_t grp = 0; grp < groups; ++grp) {
        __m512i ws = _mm512_setzero_si512();
        for (int64_t q = 0; q < quads; ++q)
            ws = _mm512_dpbusd_epi32(ws, ones, _mm512_loadu_si512(wb + (grp * quads + q) * kQuadBytes));
        offsets[grp] = _mm512_slli_epi32(ws, 7);
    }
}
constexpr bool kHasOffsets = true;
#else
constexpr int kChains = 1;

// acc[2r], acc[2r + 1] (channels 0-7, 8-15) += sum over the group's quads of xq[r] . w, exactly.
template <int MR>
static void group_dots(const int8_t* w, int64_t quads, const uint8_t* const* xu, int64_t q0, __m256i* acc,
                       const __m256i* /* no offsets: the sign trick multiplies signed codes */) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int i = 0; i < 2 * MR; ++i) acc[i] = _mm256_setzero_si256();
    for (int64_t q = 0; q < quads; ++q) {
        __builtin_prefetch(w + (q + kPrefetchQuads) * kQuadBytes);  // a quad is one 64-byte line
        const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + q * kQuadBytes));
        const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + q * kQuadBytes + 32));
        for (int r = 0; r < MR; ++r) {
            int32_t x4;
            std::memcpy(&x4, xu[r] + 4 * (q0 + q), sizeof x4);  // here xu holds the signed codes
            const __m256i xb = _mm256_set1_epi32(x4);
            const __m256i ax = _mm256_abs_epi8(xb);
            acc[2 * r] = _mm256_add_epi32(acc[2 * r],
                                          _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(w0, xb)), ones));
            acc[2 * r + 1] = _mm256_add_epi32(acc[2 * r + 1],
                                              _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(w1, xb)), ones));
        }
    }
}

template <int MR>
static void scale_into(const float* scale, const float* xs, const __m256i* acc, float (*total)[kBlock]) {
    for (int h = 0; h < 2; ++h) {
        const __m256 s = _mm256_loadu_ps(scale + 8 * h);
        for (int r = 0; r < MR; ++r) {
            const __m256 t = _mm256_loadu_ps(total[r] + 8 * h);
            _mm256_storeu_ps(total[r] + 8 * h, _mm256_fmadd_ps(_mm256_mul_ps(s, _mm256_set1_ps(xs[r])),
                                                               _mm256_cvtepi32_ps(acc[2 * r + h]), t));
        }
    }
}
using Acc = __m256i;
static void block_offsets(const int8_t*, int64_t, int64_t, __m256i*) {}
constexpr bool kHasOffsets = false;
#endif

// One block of 16 channels for MR (<= 8) rows starting at row r0.
template <int MR>
static void block_rows(const WoqGemmArgs& g, int64_t blk, int64_t r0, const uint8_t* xu, const float* xs,
                       const Acc* offsets) {
    const int64_t gs = g.group_size, groups = g.k / gs, quads = gs / 4;
    const float* qp = block_qparams(g, blk);
    const int8_t* wb = static_cast<const int8_t*>(g.w) + blk * g.k * kBlock;
    const uint8_t* rows[MR];
    for (int r = 0; r < MR; ++r) rows[r] = xu + (r0 + r) * g.k;
    alignas(64) float total[MR][kBlock] = {};
    for (int64_t grp = 0; grp < groups; ++grp) {
        Acc acc[MR * (sizeof(Acc) == 64 ? 1 : 2)];
        group_dots<MR>(wb + grp * quads * kQuadBytes, quads, rows, grp * quads, acc, offsets ? offsets + grp : nullptr);
        scale_into<MR>(group_scales(g, qp, grp), xs + r0, acc, total);
    }
    const int64_t n0 = blk * kBlock, cols = g.n - n0 < kBlock ? g.n - n0 : kBlock;
    for (int r = 0; r < MR; ++r) {
        float* y = g.y + (r0 + r) * g.y_stride + n0;
        for (int64_t j = 0; j < cols; ++j) y[j] = total[r][j] + (g.bias ? g.bias[n0 + j] : 0.0f);
        add_residual(g, r0 + r, r0 + r + 1, n0, cols);
    }
}

// count weight-sum vectors in the thread's scratch, 64-byte aligned.
static Acc* offsets_scratch(int64_t count) {
    float* p = scratch_floats(count * static_cast<int64_t>(sizeof(Acc) / 4) + 16);
    return reinterpret_cast<Acc*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t(63));
}

#include "woq_gemm/amx_prefill.h"

#if defined(__AMX_INT8__)
// Prefill on AMX tiles (the amx build; amx_prefill.h): x's offset codes as the VNNI path's, and a block's packed
// k-quads are B tiles as they lie (64-byte rows, 16 quads = 64 k), so nothing is repacked; per group
// 128 * sum w is taken off and the VNNI path's float steps follow.

static void amx_prefill(const WoqGemmArgs& g, const uint8_t* xu, const float* xs) {
    const int64_t groups = g.k / g.group_size, quads = g.group_size / 4;
    const int8_t* codes = static_cast<const int8_t*>(g.w);
    const auto block_sums = [&](int64_t blk, Acc* out) { block_offsets(codes + blk * g.k * kBlock, groups, quads, out); };
    amx_pairs(g, block_sums, [&](const Acc* o, int64_t b0, int64_t b1, int64_t p0) {
        const int8_t* w[2] = {codes + b0 * g.k * kBlock, codes + b1 * g.k * kBlock};
        const float* qp[2] = {block_qparams(g, b0), block_qparams(g, b1)};
        const auto b_tile = [&](int j, int64_t k0) { return w[j] + k0 * kBlock; };  // quad k0 / 4: k0 * 16 bytes in
        const auto scale = [&](int j, int64_t grp, int64_t row, __m512i sums, float* total) {
            const __m512i acc = _mm512_sub_epi32(sums, o[j * groups + grp]);
            const __m512 s = _mm512_mul_ps(_mm512_loadu_ps(group_scales(g, qp[j], grp)), _mm512_set1_ps(xs[row]));
            _mm512_store_ps(total, _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(acc), _mm512_load_ps(total)));
        };
        amx_pair(g, b0, b1, p0, xu, b_tile, scale);
    });
}
#endif

static void woq_gemm_w8a8(const WoqGemmArgs& g) {
    const int64_t blocks = (g.n + kBlock - 1) / kBlock;
    const int64_t m_rows = x_rows(g);
    // x rounded once per call: the row scales and the codes (signed; AVX-512 VNNI: offset by 128, unsigned).
    uint8_t* xu = new uint8_t[static_cast<size_t>(m_rows * g.k)];  // bad_alloc reaches Python as MemoryError
    float* xs = new float[static_cast<size_t>(m_rows)];
    quantize_rows(g.x, g.x_stride, g.m, g.k, g.threads, reinterpret_cast<int8_t*>(xu), xs, kHasOffsets);
#if defined(__AMX_INT8__)
    if (amx_takes(g)) {
        std::memset(xu + g.m * g.k, 0, static_cast<size_t>((m_rows - g.m) * g.k));
        std::memset(xs + g.m, 0, static_cast<size_t>(m_rows - g.m) * sizeof(float));
        amx_prefill(g, xu, xs);
        delete[] xs;
        delete[] xu;
        return;
    }
#endif
    const int64_t work = g.k * kBlock * g.m;
    const int64_t grain = work >= kMinMacsPerTask ? 1 : kMinMacsPerTask / work;
    // Parallel over blocks of channels; each task takes every row through its block, 4 at a time, so the
    // block's codes come from DRAM once and from cache for the other rows.
    // With more than one row quad, each block's weight sums are taken once (VNNI), not once per quad.
    const int64_t groups = g.k / g.group_size, quads = g.group_size / 4;
    const bool shared_offsets = kHasOffsets && g.m > 4;
    // Prefill (VNNI): rows in panels of kPanelRows whose codes stay in L2 while every block of the task goes
    // through them, the blocks' weight sums taken once per task.
    if (shared_offsets && g.m > kPanelRows) {
        parallel(blocks, grain, g.threads, [&](int64_t begin, int64_t end) {
            Acc* offsets = offsets_scratch((end - begin) * groups);
            for (int64_t blk = begin; blk < end; ++blk)
                block_offsets(static_cast<const int8_t*>(g.w) + blk * g.k * kBlock, groups, quads, offsets + (blk - begin) * groups);
            for (int64_t p0 = 0; p0 < g.m; p0 += kPanelRows) {
                const int64_t panel = g.m - p0 < kPanelRows ? g.m - p0 : kPanelRows;
                for (int64_t blk = begin; blk < end; ++blk)
                    for_each_row_octet(panel, [&](int64_t r0, auto rows) {
                        block_rows<decltype(rows)::value>(g, blk, p0 + r0, xu, xs, offsets + (blk - begin) * groups);
                    });
            }
        });
        delete[] xs;
        delete[] xu;
        return;
    }
    parallel(blocks, grain, g.threads, [&](int64_t begin, int64_t end) {
        Acc* offsets = shared_offsets ? offsets_scratch(groups) : nullptr;
        for (int64_t blk = begin; blk < end; ++blk) {
            if (offsets) block_offsets(static_cast<const int8_t*>(g.w) + blk * g.k * kBlock, groups, quads, offsets);
            if (offsets) {
                for_each_row_octet(g.m, [&](int64_t r0, auto rows) {
                    block_rows<decltype(rows)::value>(g, blk, r0, xu, xs, offsets);
                });
            } else {
                for_each_row_quad(g.m, [&](int64_t r0, auto rows) {
                    block_rows<decltype(rows)::value>(g, blk, r0, xu, xs, offsets);
                });
            }
        }
    }, stream_chunk(g.k * kBlock));
    delete[] xs;
    delete[] xu;
}

IPXC_REGISTER_KERNEL(woq_gemm_w8a8, woq_gemm_w8a8);

}  // namespace IPXC_NS
}  // namespace ipxc
