// attention: softmax(q k^T * scale + mask) v for bf16 q/k/v, fp32 accumulation, built for the
// amx level (tile products, attention_amx.h) and the avx512_bf16 level (vdpbf16ps products,
// attention_dpbf16.h); everything else here is shared.
//
// Per (batch, head): K and V are repacked once into the pair-interleaved layout tdpbf16ps reads
// its B operand in (one row of it is also what vdpbf16ps multiplies a broadcast query pair
// with); then each block of 16 queries computes its scores S = Q K^T * scale + bias (bias: the
// mask widened to fp32 once, -inf for the padding keys) together with each row's running max,
// P = e^(S - rowmax) in fp32 rounded to bf16, O = P V, and O / rowsum rounded to bf16 (the
// order torch's flash attention uses, with the same error). Q is read in place (its rows may be
// strided, e.g. a slice of a packed QKV projection); O rows are written through their strides,
// as bf16 or, for the int8 layer after attention, as the codes the quantize node would have made
// of those bf16 values; a row whose every key the mask removes is stored as 0 (as the op
// promises). Keys are padded to a multiple of 32 with zeros that the softmax leaves out. While
// one head computes, the next head's q/k/v rows are prefetched into L2 (they are
// strided slices of a tensor too big for it, and missing on them cost a third of the time).
#include "attention_simd.h"
#include "common.h"
#include "quant.h"
#include "amx_tiles.h"

#if !defined(__AVX512BF16__)
#error "attention.cpp is compiled for the avx512_bf16 and amx levels only"
#endif
#include <immintrin.h>

namespace ipxc {
namespace IPXC_NS {
namespace {

constexpr int64_t kRows = 16;       // rows of every tile: queries per block
constexpr int64_t kDepth = 32;      // bf16 values along the reduction in one tile row (64 bytes)
constexpr int64_t kTileHalves = 512;  // bf16 values in one A or B tile

// B operand of S = Q K^T. Tile (key block kb, depth chunk c), row p, column n holds the bf16
// pair K[16 kb + n][32 c + 2p .. 2p + 1] as one 32-bit value: 16 key rows of 64 bytes, transposed.
void pack_keys(const uint16_t* k, int64_t row_stride, int64_t kv_len, int64_t kv_pad, int64_t head_dim,
               uint32_t* packed) {
    const int64_t chunks = head_dim / kDepth;
    __m512i m[16];
    for (int64_t kb = 0; kb < kv_pad / 16; ++kb) {
        for (int64_t c = 0; c < chunks; ++c) {
            for (int64_t n = 0; n < 16; ++n) {
                const int64_t key = kb * 16 + n;
                m[n] = key < kv_len ? _mm512_loadu_si512(k + key * row_stride + c * kDepth) : _mm512_setzero_si512();
            }
            transpose_16x16(m);
            uint32_t* tile = packed + (kb * chunks + c) * (kTileHalves / 2);
            for (int p = 0; p < 16; ++p) _mm512_storeu_si512(tile + p * 16, m[p]);
        }
    }
}

// B operand of O = P V. Tile (key chunk kc, dim block db), row p, column n holds
// [V[32 kc + 2p][16 db + n], V[32 kc + 2p + 1][16 db + n]]: two key rows interleaved.
void pack_values(const uint16_t* v, int64_t row_stride, int64_t kv_len, int64_t kv_pad, int64_t head_dim,
                 uint16_t* packed) {
    const int64_t blocks = head_dim / 16;
    alignas(64) uint16_t order[32];
    for (int i = 0; i < 32; ++i) order[i] = static_cast<uint16_t>(i % 2 ? 16 + i / 2 : i / 2);
    const __m512i interleave = _mm512_load_si512(order);
    for (int64_t kc = 0; kc < kv_pad / kDepth; ++kc) {
        for (int p = 0; p < 16; ++p) {
            const int64_t key = kc * kDepth + 2 * p;
            const uint16_t* row0 = key < kv_len ? v + key * row_stride : nullptr;
            const uint16_t* row1 = key + 1 < kv_len ? v + (key + 1) * row_stride : nullptr;
            for (int64_t db = 0; db < blocks; ++db) {
                const __m256i a = row0 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row0 + db * 16))
                                       : _mm256_setzero_si256();
                const __m256i b = row1 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row1 + db * 16))
                                       : _mm256_setzero_si256();
                const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
                _mm512_storeu_si512(packed + (kc * blocks + db) * kTileHalves + p * 32,
                                    _mm512_permutexvar_epi16(interleave, both));
            }
        }
    }
}

// 16 scores leaving the products: acc * scale + bias, stored at s and returned.
inline __m512 store_score(__m512 acc, __m512 scale, const float* bias, float* s) {
    const __m512 score = _mm512_fmadd_ps(acc, scale, _mm512_loadu_ps(bias));
    _mm512_storeu_ps(s, score);
    return score;
}

// Where a block of scores goes: row r, keys j .. j + 15 of the 16-row block become
// acc * scale + bias[r][j ..] in scores (rows kv_pad apart), and row_max[r] keeps their lane-wise max
// (in memory between groups of keys: held in registers, the 16 maxes crowd out the products' accumulators).
struct ScoreEpilogue {
    float* scores;
    int64_t kv_pad;
    const float* bias;
    int64_t bias_stride;  // 0: one bias row for every query
    __m512 scale;
    float (*row_max)[16];
};

// Columns [j0, j1) of the 16 score rows, stored there as raw sums by the tiles, through the epilogue in place, each
// row's max kept in a register. The struct's fields are copied out first: through it gcc reloads every field after
// each store.
inline void score_epilogue(const ScoreEpilogue& e, int64_t j0, int64_t j1) {
    float* __restrict scores = e.scores;
    const float* __restrict bias = e.bias;
    const int64_t kv_pad = e.kv_pad, bias_stride = e.bias_stride;
    const __m512 scale = e.scale;
    for (int64_t r = 0; r < kRows; ++r) {
        __m512 m = _mm512_load_ps(e.row_max[r]);
        for (int64_t j = j0; j < j1; j += 16)
            m = _mm512_max_ps(m, store_score(_mm512_loadu_ps(scores + r * kv_pad + j), scale,
                                             bias + r * bias_stride + j, scores + r * kv_pad + j));
        _mm512_store_ps(e.row_max[r], m);
    }
}

#if defined(__AMX_TILE__)
#include "attention_amx.h"
#else
#include "attention_dpbf16.h"
#endif

// e^x for x <= 0 (a score minus its row's max), to 3e-6 relative: P is rounded to bf16 (2^-9) and
// its sum is taken in fp32, so this is as good as the full-precision e^x there, in 9 instructions
// instead of 14. 2^t with t = x log2(e) split into n = round(t) and f in [-0.5, 0.5]: a degree-4
// polynomial for 2^f with p(0) = 1 exactly (so P's largest value is exactly 1), scaled by 2^n.
// Exactly 0 where t < -125 (padding and masked keys, -inf included), so no result is an fp32
// denormal (arithmetic on those takes microcode assists on some CPUs); NaN stays NaN, as in torch
// (the compare is unordered-true).
inline __m512 exp_nonpositive(__m512 x) {
    const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504f));
    const __mmask16 normal = _mm512_cmp_ps_mask(t, _mm512_set1_ps(-125.0f), _CMP_NLT_UQ);
    const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(t, n);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(0.009600966f), f, _mm512_set1_ps(0.055916183f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.24023707f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.69312215f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_maskz_scalef_ps(normal, p, n);
}

// Lane r: the max (or the sum) of rows[r]'s 16 lanes, for 16 rows at once (a transpose and 15
// lane-wise steps: a third of the instructions of 16 horizontal reductions, and no long chains).
template <bool Max>
inline __m512 reduce_rows(__m512i rows[16]) {
    transpose_16x16(rows);
    __m512 acc = _mm512_castsi512_ps(rows[0]);
    for (int i = 1; i < 16; ++i)
        acc = Max ? _mm512_max_ps(acc, _mm512_castsi512_ps(rows[i])) : _mm512_add_ps(acc, _mm512_castsi512_ps(rows[i]));
    return acc;
}

// P = e^(s - rowmax) for the first `rows` rows of a query block's scores (kv_pad each, already
// scaled and biased, -inf past kv_len), rounded to bf16; inv_sum[r] = 1 / sum(e) of row r (of the
// unrounded values), which the output is multiplied by after P V. As in torch's flash attention:
// P's largest value is exactly 1, and the division happens once, in fp32 (normalising before
// rounding P measured 25% more error). Two vectors a step (kv_pad is a multiple of 32).
void softmax_block(const float* __restrict scores, int64_t kv_pad, const float (*row_max)[16], int64_t rows,
                   uint16_t* __restrict probs, float* __restrict inv_sum) {
    __m512i lanes[16];
    for (int r = 0; r < kRows; ++r) lanes[r] = _mm512_castps_si512(_mm512_load_ps(row_max[r]));
    alignas(64) float maxes[kRows];
    _mm512_store_ps(maxes, reduce_rows<true>(lanes));
    for (int64_t r = 0; r < kRows; ++r) {
        if (r >= rows) {  // the tail block's padding rows: a sum of 1, unused
            lanes[r] = _mm512_castps_si512(_mm512_set_ps(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1));
            continue;
        }
        uint16_t* p = probs + r * kv_pad;
        const V16 sums = exp_and_sum_lanes(
            scores + r * kv_pad, maxes[r], kv_pad, [](V16 x) { return V16{exp_nonpositive(x.v)}; },
            [&](int64_t j, V16 a, V16 b) { _mm512_storeu_si512(p + j, (__m512i)_mm512_cvtne2ps_pbh(b.v, a.v)); });  // a low
        lanes[r] = _mm512_castps_si512(sums.v);
    }
    _mm512_store_ps(inv_sum, _mm512_div_ps(_mm512_set1_ps(1.0f), reduce_rows<false>(lanes)));
}

// rows rows of the score bias, kv_pad floats each: the mask row (fp32 or bf16; 0 without a mask)
// widened to fp32, -inf for keys kv_len .. kv_pad - 1.
template <class M>
void fill_bias(const M* mask, int64_t mask_row_stride, int64_t rows, int64_t kv_len, int64_t kv_pad, float* bias) {
    const __m512 minus_inf = _mm512_set1_ps(-__builtin_inff());
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < kv_pad; j += 16) {
            const __mmask16 lanes = lanes_below(kv_len - j);
            const __m512 m = mask ? load16(mask + r * mask_row_stride + j, lanes) : _mm512_setzero_ps();
            _mm512_storeu_ps(bias + r * kv_pad + j, _mm512_mask_mov_ps(minus_inf, lanes, m));
        }
}

// Keys [0, n) that can carry weight under a bias row (kv_pad long, -inf past kv_len): past the last
// key it does not set to -inf every score is e^-inf = 0, so the head computes nothing there (a padded
// batch's padding: most of a batch of short sentences). kv_len when every key is masked (such rows
// are stored as 0).
int64_t live_keys(const float* bias, int64_t kv_pad, int64_t kv_len) {
    const __m512 minus_inf = _mm512_set1_ps(-__builtin_inff());
    int64_t j = kv_pad;
    while (j >= 16 && _mm512_cmp_ps_mask(_mm512_loadu_ps(bias + j - 16), minus_inf, _CMP_EQ_OQ) == 0xFFFF) j -= 16;
    while (j > 0 && bias[j - 1] == -__builtin_inff()) --j;
    return j > 0 ? j : kv_len;
}

// Asks for rows [r0, r0 + count) of a head's q, k and v (each `lines` 64-byte lines long) to be
// brought into L2 (the next head's, while this one computes).
void prefetch_rows(const AttentionArgs& a, int64_t b, int64_t h, int64_t r0, int64_t count, int64_t lines) {
    const char* q = reinterpret_cast<const char*>(head_at<const uint16_t>(a.q, a.q_strides, b, h));
    const char* k = reinterpret_cast<const char*>(head_at<const uint16_t>(a.k, a.k_strides, b, h));
    const char* v = reinterpret_cast<const char*>(head_at<const uint16_t>(a.v, a.v_strides, b, h));
    for (int64_t r = r0; r < r0 + count; ++r)
        for (int64_t l = 0; l < lines; ++l) {
            if (r < a.q_len) _mm_prefetch(q + 2 * r * a.q_strides[2] + 64 * l, _MM_HINT_T1);
            if (r < a.kv_len) {
                _mm_prefetch(k + 2 * r * a.k_strides[2] + 64 * l, _MM_HINT_T1);
                _mm_prefetch(v + 2 * r * a.v_strides[2] + 64 * l, _MM_HINT_T1);
            }
        }
}

// One (batch, head): every block of 16 queries; (next_b, next_h): the head to prefetch (next_b < 0: none).
template <class M>
void attend(const AttentionArgs& a, int64_t b, int64_t h, int64_t next_b, int64_t next_h, float* scratch) {
    const int64_t d = a.head_dim, full_pad = (a.kv_len + kDepth - 1) / kDepth * kDepth;
    const int64_t chunks = d / kDepth, blocks = d / 16;
    // scratch, laid out for all kv_len keys (full_pad) though a head may use fewer: packed K and V
    // (full_pad x d bf16 each), scores (16 x full_pad fp32), P (16 x full_pad bf16), a zero-padded
    // Q block (16 x d bf16), four C tiles (16 x 16 fp32 each) and the bias (16 x full_pad fp32).
    uint32_t* packed_k = reinterpret_cast<uint32_t*>(scratch);
    uint16_t* packed_v = reinterpret_cast<uint16_t*>(scratch + full_pad * d / 2);
    float* scores = scratch + full_pad * d;
    uint16_t* probs = reinterpret_cast<uint16_t*>(scores + kRows * full_pad);
    uint16_t* q_pad = probs + kRows * full_pad;
    float* c_tiles = reinterpret_cast<float*>(q_pad + kRows * d);
    float* bias = c_tiles + 4 * 256;

    const uint16_t* q = head_at<const uint16_t>(a.q, a.q_strides, b, h);
    const uint16_t* k = head_at<const uint16_t>(a.k, a.k_strides, b, h);
    const uint16_t* v = head_at<const uint16_t>(a.v, a.v_strides, b, h);
    uint16_t* out = head_at<uint16_t>(a.out, a.out_strides, b, h);
    int8_t* out_codes = head_at<int8_t>(a.out, a.out_strides, b, h);  // when quantized
    const Quantize16 quantize(a.q_multipliers, a.q_scale, a.q_zero_point, a.q_unsigned);
    const M* mask = a.mask ? head_at<const M>(a.mask, a.mask_strides, b, h) : nullptr;
    // A mask the same for every query (a padding mask, or none) is widened once per head.
    const bool bias_per_row = mask && a.mask_strides[2] != 0;
    if (!bias_per_row) fill_bias(mask, 0, 1, a.kv_len, full_pad, bias);
    // From here on the head's keys end at the last one the mask leaves (rounded up to 32).
    const int64_t kv_len = bias_per_row ? a.kv_len : live_keys(bias, full_pad, a.kv_len);
    const int64_t kv_pad = (kv_len + kDepth - 1) / kDepth * kDepth, bias_stride = bias_per_row ? kv_pad : 0;
    pack_keys(k, a.k_strides[2], kv_len, kv_pad, d, packed_k);
    pack_values(v, a.v_strides[2], kv_len, kv_pad, d, packed_v);

    const int64_t q_blocks = (a.q_len + kRows - 1) / kRows, lines = (d * 2 + 63) / 64;
    const int64_t prefetch_share = ((a.q_len > kv_len ? a.q_len : kv_len) + q_blocks - 1) / q_blocks;
    for (int64_t q0 = 0; q0 < a.q_len; q0 += kRows) {
        const int64_t rows = a.q_len - q0 < kRows ? a.q_len - q0 : kRows;
        if (next_b >= 0) prefetch_rows(a, next_b, next_h, q0 / kRows * prefetch_share, prefetch_share, lines);
        const uint16_t* q_block = q + q0 * a.q_strides[2];
        int64_t q_stride = a.q_strides[2];
        if (rows < kRows) {  // the tail block: copy its rows next to zero rows
            std::memset(q_pad, 0, sizeof(uint16_t) * kRows * d);
            for (int64_t r = 0; r < rows; ++r) std::memcpy(q_pad + r * d, q_block + r * q_stride, sizeof(uint16_t) * d);
            q_block = q_pad, q_stride = d;
            std::memset(probs, 0, sizeof(uint16_t) * kRows * kv_pad);
        }
        if (bias_per_row) {  // rows past the tail get a zero bias: their scores are never used
            fill_bias(mask + q0 * a.mask_strides[2], a.mask_strides[2], rows, kv_len, kv_pad, bias);
            std::memset(bias + rows * kv_pad, 0, sizeof(float) * (kRows - rows) * kv_pad);
        }
        alignas(64) float row_max[kRows][16];
        for (auto& m : row_max) _mm512_store_ps(m, _mm512_set1_ps(-__builtin_inff()));
        const ScoreEpilogue epilogue{scores, kv_pad, bias, bias_stride, _mm512_set1_ps(a.scale), row_max};
        score_block(q_block, q_stride, packed_k, chunks, epilogue);
        alignas(64) float inv_sum[kRows];
        softmax_block(scores, kv_pad, row_max, rows, probs, inv_sum);
        bool removed[kRows] = {};  // rows the mask removes entirely (their softmax is NaN): stored as 0
        for (int64_t r = 0; mask && r < rows; ++r)
            removed[r] = !(inv_sum[r] > 0.0f) && removes_every_key(bias + r * bias_stride, kv_len);
        for (int64_t db = 0; db < blocks;) {  // blocks = head_dim / 16 is even
            const int64_t group = blocks - db >= 4 ? 4 : 2;
            if (group == 4)
                weigh_values<4>(probs, kv_pad, packed_v, db, blocks, c_tiles);
            else
                weigh_values<2>(probs, kv_pad, packed_v, db, blocks, c_tiles);
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t j = 0; j < group; ++j) {
                    const __m512 o = removed[r] ? _mm512_setzero_ps()
                                                : _mm512_mul_ps(_mm512_loadu_ps(c_tiles + j * 256 + r * 16), _mm512_set1_ps(inv_sum[r]));
                    const int64_t at = (q0 + r) * a.out_strides[2] + (db + j) * 16;
                    if (a.quantized)
                        _mm_storeu_si128(reinterpret_cast<__m128i*>(out_codes + at),
                                         quantize(to_bf16_and_back(o), h * d + (db + j) * 16, 0xFFFF));
                    else
                        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + at), (__m256i)_mm512_cvtneps_pbh(o));
                }
            db += group;
        }
    }
}

void attention(const AttentionArgs& a) {
    const int64_t d = a.head_dim, kv_pad = (a.kv_len + kDepth - 1) / kDepth * kDepth;
    const int64_t scratch_size = kv_pad * d + kRows * kv_pad * 5 / 2 + kRows * d / 2 + 4 * 256 + 16;
    parallel(a.batch * a.heads, 1, a.threads, [&](int64_t begin, int64_t end) {
        float* scratch = scratch_floats(scratch_size);
        products_begin();
        for (int64_t unit = begin; unit < end; ++unit) {
            const int64_t b = unit / a.heads, h = unit % a.heads;
            const int64_t next_b = unit + 1 < end ? (unit + 1) / a.heads : -1, next_h = (unit + 1) % a.heads;
            if (a.mask && a.mask_dtype == DType::bf16)
                attend<uint16_t>(a, b, h, next_b, next_h, scratch);
            else
                attend<float>(a, b, h, next_b, next_h, scratch);
        }
        products_end();
    });
}

}  // namespace

IPXC_REGISTER_KERNEL(attention, attention);

}  // namespace IPXC_NS
}  // namespace ipxc
