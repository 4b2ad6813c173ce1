// woq_gemm_w4a8 (args.h, path 5; AVX-512 VNNI): 4-bit weights times rows of x rounded to int8, every row
// count, in integer dot products: woq_linear's `activations: int8` meaning, as path 3, without its
// per-code unpacking.
//
// Packed layout (pack_woq_weight with octets): uint8 [n16 / 16][k / 8][16][4]: for each 8 consecutive k,
// channel c's 32-bit lane holds byte b = code(8o + b) | code(8o + 4 + b) << 4. One 64-byte load is then
// 16 channels x 8 codes; masking the low nibbles gives 16 lanes of 4 unsigned codes for k 8o..8o+3, the
// high nibbles those for 8o+4..8o+7, each the unsigned operand of one vpdpbusd against 4 broadcast bytes
// of x (signed): 128 multiply-adds for 2 instructions plus one vpdpbusd per row, so decode streams the
// codes at memory speed instead of converting each to a float. The high nibbles are not shifted down:
// v & 0xF0 is 16 x the code, its products summed apart and divided by 16 (exactly: a shift of a multiple
// of 16) once per group, which takes the shift off port 0 beside the vpdpbusd.
// Per group, exactly in integers, acc = sum xq * q; y += scale * xs * (acc - zero * sum xq) in float32.
#include <immintrin.h>

#include <cstring>

#include "common.h"
#include "amx_tiles.h"
#include "woq_gemm/int8_rows.h"

namespace ipxc {
namespace IPXC_NS {

constexpr int kBlock = 16;
constexpr int64_t kOctetBytes = 64;      // one k-octet of a block: 16 channels x 8 codes of 4 bits
constexpr int64_t kPrefetchOctets = 32;  // 2 KiB ahead, as woq_gemm.cpp's decode
constexpr int kChains = 2;               // octets unrolled: 4 independent accumulators per row
constexpr int64_t kMinMacsPerTask = 1 << 16;
// Prefill rows whose codes stay in L1 (32 x 896 = 28 KB) while every block of a task goes through them. Without
// panels each block took all of a 512-token prompt's rows, whose codes (458 KB at k = 896) then came from L3 once
// the weights and outputs streaming through L2 pushed them out: Qwen2-0.5B's gate/up GEMM (512 x 9728 x 896) ran at
// 190 GMAC/s, 340 with panels of 32 rows, 238 with 64 and 198 with 128 (session 76, a 2-core Xeon, 48 KB L1).
constexpr int64_t kPanelRows = 32;
// Octets whose high-nibble sums fit int32 before they are folded: an octet adds at most 4 products of
// 16 x 15 and |x| <= 128 to a lane (122880), 4096 of them 503M < 2^31.
constexpr int64_t kFoldOctets = 1 << 12;

// acc[r] (16 channels) = sum over the group's octets of xq[r] . q, exactly.
template <int MR>
static void group_dots(const uint8_t* w, int64_t octets, const int8_t* const* xq, int64_t o0, __m512i* acc) {
    const __m512i low = _mm512_set1_epi8(0x0F), high = _mm512_set1_epi8(static_cast<char>(0xF0));
    __m512i dot[MR][2 * kChains];  // [2c]: low nibbles; [2c + 1]: 16 x the high nibbles
    for (int r = 0; r < MR; ++r) acc[r] = _mm512_setzero_si512();
    auto step = [&](int64_t o, int chain) {
        __builtin_prefetch(w + (o + kPrefetchOctets) * kOctetBytes);  // an octet is one 64-byte line
        const __m512i v = _mm512_loadu_si512(w + o * kOctetBytes);
        const __m512i lo = _mm512_and_si512(v, low), hi16 = _mm512_and_si512(v, high);
        for (int r = 0; r < MR; ++r) {
            int32_t x_lo, x_hi;
            std::memcpy(&x_lo, xq[r] + 8 * (o0 + o), sizeof x_lo);
            std::memcpy(&x_hi, xq[r] + 8 * (o0 + o) + 4, sizeof x_hi);
            dot[r][2 * chain] = _mm512_dpbusd_epi32(dot[r][2 * chain], lo, _mm512_set1_epi32(x_lo));
            dot[r][2 * chain + 1] = _mm512_dpbusd_epi32(dot[r][2 * chain + 1], hi16, _mm512_set1_epi32(x_hi));
        }
    };
    for (int64_t f0 = 0; f0 < octets; f0 += kFoldOctets) {
        const int64_t f1 = octets - f0 < kFoldOctets ? octets : f0 + kFoldOctets;
        for (int r = 0; r < MR; ++r)
            for (int c = 0; c < 2 * kChains; ++c) dot[r][c] = _mm512_setzero_si512();
        int64_t o = f0;
        for (; o + kChains <= f1; o += kChains)
            for (int c = 0; c < kChains; ++c) step(o + c, c);
        for (; o < f1; ++o) step(o, 0);
        for (int r = 0; r < MR; ++r) {
            __m512i lo = dot[r][0], hi16 = dot[r][1];
            for (int c = 1; c < kChains; ++c) {
                lo = _mm512_add_epi32(lo, dot[r][2 * c]);
                hi16 = _mm512_add_epi32(hi16, dot[r][2 * c + 1]);
            }
            acc[r] = _mm512_add_epi32(acc[r], _mm512_add_epi32(lo, _mm512_srai_epi32(hi16, 4)));
        }
    }
}

// One block of 16 channels for MR (<= 4) rows starting at row r0.
template <int MR>
static void block_rows(const WoqGemmArgs& g, int64_t blk, int64_t r0, const int8_t* xq, const float* xs,
                       const int32_t* xsum) {
    const int64_t gs = g.group_size, groups = g.k / gs, octets = gs / 8;
    const float* qp = block_qparams(g, blk);
    const uint8_t* wb = static_cast<const uint8_t*>(g.w) + blk * (g.k / 2) * kBlock;
    const int8_t* rows[MR];
    for (int r = 0; r < MR; ++r) rows[r] = xq + (r0 + r) * g.k;
    __m512 total[MR];
    for (int r = 0; r < MR; ++r) total[r] = _mm512_setzero_ps();
    for (int64_t grp = 0; grp < groups; ++grp) {
        __m512i acc[MR];
        group_dots<MR>(wb + grp * octets * kOctetBytes, octets, rows, grp * octets, acc);
        const __m512 scale = _mm512_loadu_ps(group_scales(g, qp, grp));
        const __m512 zero = _mm512_loadu_ps(group_zeros(g, qp, grp));
        for (int r = 0; r < MR; ++r) {
            // acc - zero * sum xq: both exact integers below 2^24 for groups up to ~8800 inputs
            const __m512 a = _mm512_fnmadd_ps(zero, _mm512_set1_ps(static_cast<float>(xsum[(r0 + r) * groups + grp])),
                                              _mm512_cvtepi32_ps(acc[r]));
            total[r] = _mm512_fmadd_ps(_mm512_mul_ps(scale, _mm512_set1_ps(xs[r0 + r])), a, total[r]);
        }
    }
    const int64_t n0 = blk * kBlock, cols = g.n - n0 < kBlock ? g.n - n0 : kBlock;
    for (int r = 0; r < MR; ++r) {
        alignas(64) float t[kBlock];
        _mm512_store_ps(t, total[r]);
        float* y = g.y + (r0 + r) * g.y_stride + n0;
        for (int64_t j = 0; j < cols; ++j) y[j] = t[j] + (g.bias ? g.bias[n0 + j] : 0.0f);
        add_residual(g, r0 + r, r0 + r + 1, n0, cols);
    }
}

#include "woq_gemm/amx_prefill.h"

#if defined(__AMX_INT8__)
// Prefill on AMX tiles (the amx build; amx_prefill.h): x as the unsigned operand (its codes offset by 128, a
// sign-bit flip) and the 4-bit codes as the signed one (0..15): each k-octet's low and high nibbles are the two
// k-quad rows of a B tile (16 channels x 4 codes), so 8 octets unpack into one 16 x 64 tile with a mask and a
// shift. sum (xq + 128) q = sum xq q + 128 sum q: the second term is taken once per block and group; then the
// VNNI path's float steps on the same exact integers.

// 128 * sum of the codes of each group of one block (16 channels).
static void code_offsets(const uint8_t* wb, int64_t groups, int64_t octets, __m512i* offsets) {
    const __m512i low = _mm512_set1_epi8(0x0F), ones = _mm512_set1_epi8(1);
    for (int64_t grp = 0; grp < groups; ++grp) {
        __m512i ws = _mm512_setzero_si512();
        for (int64_t o = 0; o < octets; ++o) {
            const __m512i v = _mm512_loadu_si512(wb + (grp * octets + o) * kOctetBytes);
            ws = _mm512_dpbusd_epi32(ws, _mm512_and_si512(v, low), ones);
            ws = _mm512_dpbusd_epi32(ws, _mm512_and_si512(_mm512_srli_epi16(v, 4), low), ones);
        }
        offsets[grp] = _mm512_slli_epi32(ws, 7);
    }
}

// The B tile of k [k0, k0 + 64) of one block: 16 k-quads x 16 channels x 4 codes, from its 8 octets.
static const int8_t* unpack_tile(const uint8_t* wb, int64_t k0, int8_t* tile) {
    const __m512i low = _mm512_set1_epi8(0x0F);
    for (int o = 0; o < 8; ++o) {
        const __m512i v = _mm512_loadu_si512(wb + (k0 / 8 + o) * kOctetBytes);
        _mm512_store_si512(tile + 2 * o * 64, _mm512_and_si512(v, low));
        _mm512_store_si512(tile + (2 * o + 1) * 64, _mm512_and_si512(_mm512_srli_epi16(v, 4), low));
    }
    return tile;
}

static void amx_prefill(const WoqGemmArgs& g, const uint8_t* xu, const float* xs, const int32_t* xsum) {
    const int64_t groups = g.k / g.group_size;
    const uint8_t* codes = static_cast<const uint8_t*>(g.w);
    const auto block_sums = [&](int64_t blk, __m512i* out) {
        code_offsets(codes + blk * (g.k / 2) * kBlock, groups, g.group_size / 8, out);
    };
    amx_pairs(g, block_sums, [&](const __m512i* o, int64_t b0, int64_t b1, int64_t p0) {
        const uint8_t* w[2] = {codes + b0 * (g.k / 2) * kBlock, codes + b1 * (g.k / 2) * kBlock};
        const float* qp[2] = {block_qparams(g, b0), block_qparams(g, b1)};
        alignas(64) int8_t tiles[2][16 * 64];
        const auto b_tile = [&](int j, int64_t k0) { return unpack_tile(w[j], k0, tiles[j]); };
        const auto scale = [&](int j, int64_t grp, int64_t row, __m512i sums, float* total) {
            const __m512i acc = _mm512_sub_epi32(sums, o[j * groups + grp]);
            const __m512 zero = _mm512_loadu_ps(group_zeros(g, qp[j], grp));
            const __m512 a = _mm512_fnmadd_ps(zero, _mm512_set1_ps(static_cast<float>(xsum[row * groups + grp])),
                                              _mm512_cvtepi32_ps(acc));
            const __m512 s = _mm512_mul_ps(_mm512_loadu_ps(group_scales(g, qp[j], grp)), _mm512_set1_ps(xs[row]));
            _mm512_store_ps(total, _mm512_fmadd_ps(s, a, _mm512_load_ps(total)));
        };
        amx_pair(g, b0, b1, p0, xu, b_tile, scale);
    });
}
#endif

static void woq_gemm_w4a8(const WoqGemmArgs& g) {
    const int64_t groups = g.k / g.group_size;
    const int64_t blocks = (g.n + kBlock - 1) / kBlock;
    const int64_t m_rows = x_rows(g);
    int8_t* xq = new int8_t[static_cast<size_t>(m_rows * g.k)];  // bad_alloc reaches Python as MemoryError
    int32_t* xsum = new int32_t[static_cast<size_t>(m_rows * groups)];
    float* xs = new float[static_cast<size_t>(m_rows)];
    quantize_rows(g.x, g.x_stride, g.m, g.k, g.threads, xq, xs, false, g.group_size, xsum);
#if defined(__AMX_INT8__)
    if (amx_takes(g)) {
        // the unsigned operand: xq + 128, a flip of each code's sign bit (padding rows: code 0, scale 0)
        const int64_t bytes = g.m * g.k;
        int64_t i = 0;
        for (; i + 64 <= bytes; i += 64)
            _mm512_storeu_si512(xq + i, _mm512_xor_si512(_mm512_loadu_si512(xq + i), _mm512_set1_epi8(-128)));
        for (; i < bytes; ++i) xq[i] = static_cast<int8_t>(xq[i] ^ -128);
        std::memset(xq + bytes, 0x80, static_cast<size_t>((m_rows - g.m) * g.k));
        std::memset(xsum + g.m * groups, 0, static_cast<size_t>((m_rows - g.m) * groups) * sizeof(int32_t));
        std::memset(xs + g.m, 0, static_cast<size_t>(m_rows - g.m) * sizeof(float));
        amx_prefill(g, reinterpret_cast<const uint8_t*>(xq), xs, xsum);
        delete[] xs;
        delete[] xsum;
        delete[] xq;
        return;
    }
#endif
    const int64_t work = g.k * kBlock * g.m;
    const int64_t grain = work >= kMinMacsPerTask ? 1 : kMinMacsPerTask / work;
    // Parallel over blocks of channels, 4 rows of a block at a time, so a block's codes come from DRAM once and from
    // cache for the other rows. A prompt (more than kPanelRows rows) goes through each task's blocks one panel of
    // rows after another (4 rows a tile: 8, as woq_gemm_w8a8's prefill takes, measured slower here, its 16
    // accumulators and the rows' float totals spilling); decode rows are one panel, the weight stream in bounded
    // ranges.
    const bool panels = g.m > kPanelRows;
    const int64_t panel_rows = panels ? kPanelRows : g.m;
    parallel(blocks, grain, g.threads, [&](int64_t begin, int64_t end) {
        for (int64_t p0 = 0; p0 < g.m; p0 += panel_rows) {
            const int64_t panel = g.m - p0 < panel_rows ? g.m - p0 : panel_rows;
            for (int64_t blk = begin; blk < end; ++blk)
                for_each_row_quad(panel, [&](int64_t r0, auto rows) {
                    block_rows<decltype(rows)::value>(g, blk, p0 + r0, xq, xs, xsum);
                });
        }
    }, panels ? 0 : stream_chunk(g.k * kBlock / 2));
    delete[] xs;
    delete[] xsum;
    delete[] xq;
}

IPXC_REGISTER_KERNEL(woq_gemm_w4a8, woq_gemm_w4a8);

}  // namespace IPXC_NS
}  // namespace ipxc
