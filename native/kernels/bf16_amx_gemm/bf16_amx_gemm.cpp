// bf16_amx_gemm (args.h): a bf16 linear layer on AMX tiles for the row counts where oneDNN's matmul streams the
// weight slowly. BERT-base's 48 encoder linears at 128 rows (170 MB of bf16 weights, more than the L3 holds) took
// 19.8-21.0 ms through oneDNN's matmul and 16.2-17.0 ms here on 2 cores of an AMX Xeon (session 66), 16 to 64 rows
// 0.76-0.81 x oneDNN's time, 256 rows parity (benchmarks/amx_gemm.py). At these row counts a layer is bound by
// moving its weight: from memory into L2 (a read pass alone takes a third of the call), then from L2 into the tiles.
//
// Per thread a range of 32-channel panels; per panel, k in chunks of kChunkSteps x 32: the chunk's B tiles (16 KiB)
// stay in L1 while every row pair of the block passes over them (pairs of 16-row A tiles read from x as it lies,
// 2 * x_stride bytes apart), each pair's four accumulating tiles parked in a per-thread buffer between chunks. Both
// measured on the AMX Xeon against one pass over all of k per row pair (the weight for the first pair from memory,
// then from L2): the next panel's weight prefetched into L2 a few lines a step, spread over the current panel's
// steps, so memory streams while the tiles compute (a prefetch burst per panel measured nothing, session 66), and
// the chunks: the 48 BERT-base layers at 128 rows 0.84 x the time, 64 rows 0.90, 192-256 rows 0.83-0.85
// (/tmp prototype, session 68). The rows go in blocks of kRowBlock. A last pair of fewer than 32 rows is copied
// into a zero-padded buffer first (a tile reads 16 whole rows); 16 rows or fewer run one A tile.
#include "common.h"

#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
#include <immintrin.h>

#include <cstring>

#include "amx_tiles.h"
#include "gelu_erfc.h"

namespace ipxc {
namespace IPXC_NS {
namespace {

constexpr int64_t kRowBlock = 256;

// The erf GELU of 16 floats, the gelu kernel's arithmetic (gelu_erfc.h). NaN stays NaN.
inline __m512 gelu_erf16(__m512 x) {
    const __m512 z = _mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(kInvSqrt2));
    __m512 p = _mm512_set1_ps(kErfcPoly[0]);
    for (int i = 1; i < 7; ++i) p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(kErfcPoly[i]));
    p = _mm512_mul_ps(p, p);
    p = _mm512_mul_ps(p, p);
    p = _mm512_mul_ps(p, p);
    p = _mm512_mul_ps(p, p);  // P^16
    const __m512 c = _mm512_div_ps(_mm512_set1_ps(1.0f), p);  // erfc(|x| / sqrt 2)
    const __mmask16 negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    const __m512 e = _mm512_mask_mov_ps(_mm512_sub_ps(_mm512_set1_ps(2.0f), c), negative, c);
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), e);
}

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

// Software prefetch of the next panel's weight into L2, a few lines at a time.
struct Prefetch {
    const char* next = nullptr;  // null: nothing to prefetch
    int64_t line = 0, lines = 0, per_step = 0;

    inline void step() {
        if (next == nullptr) return;
        for (int64_t i = 0; i < per_step && line < lines; ++i, ++line) _mm_prefetch(next + line * 64, _MM_HINT_T1);
    }
};

// The products of one or two 16-row A tiles (Two) at x0 (x_stride elements apart) with a panel's two B tiles per 32
// k for steps [s0, s1), into accumulating tiles 0, 1 (and 2, 3).
template <bool Two>
inline void products(const uint16_t* x0, int64_t x_stride, const uint16_t* panel, int64_t s0, int64_t s1,
                     Prefetch& prefetch) {
    const int64_t x_bytes = x_stride * 2;
    for (int64_t s = s0; s < s1; ++s) {
        const uint16_t* b = panel + s * 1024;  // 1024 bf16 a 32 x 32 block
        prefetch.step();
        _tile_loadd(4, x0 + 32 * s, x_bytes);
        _tile_loadd(6, b, 128);
        _tile_dpbf16ps(0, 4, 6);
        _tile_loadd(7, b + 32, 128);
        _tile_dpbf16ps(1, 4, 7);
        if (Two) {
            _tile_loadd(5, x0 + 16 * x_stride + 32 * s, x_bytes);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
}

// Steps [s0, s1) of rows [r0, r0 + rows) (rows <= 32; x0: row r0, x_stride elements apart) times a panel, adding to
// the pair's sums c (32 rows of 32 floats, 128 bytes apart; zero before the first chunk).
void pair_chunk(const uint16_t* x0, int64_t x_stride, int64_t rows, const uint16_t* panel, int64_t s0, int64_t s1,
                float* c, Prefetch& prefetch) {
    const bool two = rows > 16;
    if (s0 == 0) {  // tile t holds rows 16 (t / 2) .. and channels 16 (t % 2) .. of c
        _tile_zero(0);
        _tile_zero(1);
        if (two) {
            _tile_zero(2);
            _tile_zero(3);
        }
    } else {
        _tile_loadd(0, c, 128);
        _tile_loadd(1, c + 16, 128);
        if (two) {
            _tile_loadd(2, c + 16 * 32, 128);
            _tile_loadd(3, c + 16 * 32 + 16, 128);
        }
    }
    if (two)
        products<true>(x0, x_stride, panel, s0, s1, prefetch);
    else
        products<false>(x0, x_stride, panel, s0, s1, prefetch);
    _tile_stored(0, c, 128);
    _tile_stored(1, c + 16, 128);
    if (two) {
        _tile_stored(2, c + 16 * 32, 128);
        _tile_stored(3, c + 16 * 32 + 16, 128);
    }
}

constexpr int64_t kChunkSteps = 8;
constexpr int64_t kPairs = kRowBlock / 32;

void bf16_amx_gemm(const Bf16AmxGemmArgs& a) {
    const int64_t panels = a.n / 32;
    const int64_t steps = a.k / 32;
    for (int64_t b0 = 0; b0 < a.m; b0 += kRowBlock) {
        const int64_t b1 = b0 + kRowBlock < a.m ? b0 + kRowBlock : a.m;
        const int64_t whole = b0 + (b1 - b0) / 32 * 32;  // rows before the last, partial pair
        const int64_t pairs = (b1 - b0 + 31) / 32;
        parallel(panels, 1, a.threads, [&](int64_t begin, int64_t end) {
            load_tiles_16x64();
            // The pairs' sums between chunks (32 KiB), and the partial pair's rows zero-padded to 32 (tiles read whole
            // rows of 16): once per thread and block.
            float* const buffer = scratch_floats(kPairs * 1024 + 16 * a.k + 16);
            float* sums = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(buffer) + 63) & ~uintptr_t{63});
            uint16_t* pad = reinterpret_cast<uint16_t*>(sums + kPairs * 1024);  // 32 rows of k bf16
            if (whole < b1) {
                std::memset(pad, 0, static_cast<size_t>(32 * a.k) * 2);
                for (int64_t r = whole; r < b1; ++r)
                    std::memcpy(pad + (r - whole) * a.k, a.x + r * a.x_stride, static_cast<size_t>(a.k) * 2);
            }
            for (int64_t p = begin; p < end; ++p) {
                const uint16_t* panel = a.w + p * steps * 1024;
                Prefetch prefetch;
                if (p + 1 < end) {
                    prefetch.next = reinterpret_cast<const char*>(panel + steps * 1024);
                    prefetch.lines = steps * 32;  // 2 KiB a step
                    prefetch.per_step = (prefetch.lines + pairs * steps - 1) / (pairs * steps);
                }
                for (int64_t s0 = 0; s0 < steps; s0 += kChunkSteps) {
                    const int64_t s1 = s0 + kChunkSteps < steps ? s0 + kChunkSteps : steps;
                    for (int64_t i = 0; i < pairs; ++i) {
                        const int64_t r = b0 + 32 * i;
                        if (r < whole)
                            pair_chunk(a.x + r * a.x_stride, a.x_stride, 32, panel, s0, s1, sums + i * 1024, prefetch);
                        else
                            pair_chunk(pad, a.k, b1 - r, panel, s0, s1, sums + i * 1024, prefetch);
                    }
                }
                for (int64_t i = 0; i < pairs; ++i) {
                    const int64_t r = b0 + 32 * i;
                    store_rows(a, sums + i * 1024, r, (r + 32 < b1 ? r + 32 : b1) - r, p * 32);
                }
            }
            _tile_release();
        });
    }
}

}  // namespace

IPXC_REGISTER_KERNEL(bf16_amx_gemm, bf16_amx_gemm);

}  // namespace IPXC_NS
}  // namespace ipxc
#endif
