// attention: softmax(q k^T * scale + mask) v for bf16 q/k/v, fp32 accumulation, built for the
// amx level (tile products, attention_amx.h) and the avx512_bf16 level (vdpbf16ps products,
// attention_dpbf16.h); everything else here is shared.
//
// Per (batch, head): K and V are repacked once into the pair-interleaved layout tdpbf16ps reads
// its B operand in (one row of it is also what vdpbf16ps multiplies a broadcast query pair
// with); then each block of 16 queries computes its scores S = Q K^T,
// P = e^(S * scale + mask - rowmax) in fp32 rounded to bf16, O = P V, and O / rowsum
// rounded to bf16 (the order torch's flash attention uses, with the same error). Q is read in
// place (its rows may be strided, e.g. a slice of a packed QKV projection); O rows are written
// through their strides, as bf16 or, for the int8 layer after attention, as the codes the
// quantize node would have made of those bf16 values. Keys are padded to a multiple of 32 with
// zeros that the softmax leaves out.
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

#if defined(__AMX_TILE__)
#include "attention_amx.h"
#else
#include "attention_dpbf16.h"
#endif

// One row of P = e^(s * scale + mask - max) over kv_len keys, rounded to bf16, zeros up to
// kv_pad; returns 1 / sum(e) (of the unrounded values), which the output is multiplied by
// after P V. As in torch's flash attention: P's largest value is exactly 1, and the division
// happens once, in fp32 (normalising before rounding P measured 25% more error). Keys past
// kv_len become -inf, so e = 0 there. Three passes over s (overwritten), two vectors a step
// (kv_pad is a multiple of 32) so the max and sum chains run two abreast. Measured faster than
// holding the row in registers.
template <class M>
float softmax_row(float* __restrict s, const M* __restrict mask, float scale, int64_t kv_len, int64_t kv_pad,
                  uint16_t* __restrict p) {
    const float row_max = scale_mask_max(s, mask, scale, kv_len, kv_pad);
    return exp_and_sum(s, row_max, kv_pad, [&](int64_t j, V16 a, V16 b) {
        const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512((__m256i)_mm512_cvtneps_pbh(a.v)),
                                                (__m256i)_mm512_cvtneps_pbh(b.v), 1);
        _mm512_storeu_si512(p + j, both);
    });
}

// One (batch, head): every block of 16 queries.
template <class M>
void attend(const AttentionArgs& a, int64_t b, int64_t h, float* scratch) {
    const int64_t d = a.head_dim, kv_len = a.kv_len, kv_pad = (kv_len + kDepth - 1) / kDepth * kDepth;
    const int64_t chunks = d / kDepth, blocks = d / 16;
    // scratch: packed K and V (kv_pad x d bf16 each), scores (16 x kv_pad fp32), P (16 x kv_pad
    // bf16), a zero-padded Q block (16 x d bf16) and four C tiles (16 x 16 fp32 each).
    uint32_t* packed_k = reinterpret_cast<uint32_t*>(scratch);
    uint16_t* packed_v = reinterpret_cast<uint16_t*>(scratch + kv_pad * d / 2);
    float* scores = scratch + kv_pad * d;
    uint16_t* probs = reinterpret_cast<uint16_t*>(scores + kRows * kv_pad);
    uint16_t* q_pad = probs + kRows * kv_pad;
    float* c_tiles = reinterpret_cast<float*>(q_pad + kRows * d);

    const uint16_t* q = head_at<const uint16_t>(a.q, a.q_strides, b, h);
    const uint16_t* k = head_at<const uint16_t>(a.k, a.k_strides, b, h);
    const uint16_t* v = head_at<const uint16_t>(a.v, a.v_strides, b, h);
    uint16_t* out = head_at<uint16_t>(a.out, a.out_strides, b, h);
    int8_t* out_codes = head_at<int8_t>(a.out, a.out_strides, b, h);  // when quantized
    const Quantize16 quantize(a.q_multipliers, a.q_scale, a.q_zero_point, a.q_unsigned);
    const M* mask = a.mask ? head_at<const M>(a.mask, a.mask_strides, b, h) : nullptr;
    pack_keys(k, a.k_strides[2], kv_len, kv_pad, d, packed_k);
    pack_values(v, a.v_strides[2], kv_len, kv_pad, d, packed_v);

    for (int64_t q0 = 0; q0 < a.q_len; q0 += kRows) {
        const int64_t rows = a.q_len - q0 < kRows ? a.q_len - q0 : kRows;
        const uint16_t* q_block = q + q0 * a.q_strides[2];
        int64_t q_stride = a.q_strides[2];
        if (rows < kRows) {  // the tail block: copy its rows next to zero rows
            std::memset(q_pad, 0, sizeof(uint16_t) * kRows * d);
            for (int64_t r = 0; r < rows; ++r) std::memcpy(q_pad + r * d, q_block + r * q_stride, sizeof(uint16_t) * d);
            q_block = q_pad, q_stride = d;
            std::memset(probs, 0, sizeof(uint16_t) * kRows * kv_pad);
        }
        int64_t kb = 0;  // kv_pad / 16 is even: groups of 4 key blocks, then maybe one of 2
        for (; kb + 4 <= kv_pad / 16; kb += 4) score_keys<4>(q_block, q_stride, packed_k, kb, chunks, scores, kv_pad);
        if (kb < kv_pad / 16) score_keys<2>(q_block, q_stride, packed_k, kb, chunks, scores, kv_pad);
        float inv_sum[kRows];
        for (int64_t r = 0; r < rows; ++r)
            inv_sum[r] = softmax_row(scores + r * kv_pad, mask ? mask + (q0 + r) * a.mask_strides[2] : nullptr, a.scale,
                                     kv_len, kv_pad, probs + r * kv_pad);
        for (int64_t db = 0; db < blocks;) {  // blocks = head_dim / 16 is even
            const int64_t group = blocks - db >= 4 ? 4 : 2;
            if (group == 4)
                weigh_values<4>(probs, kv_pad, packed_v, db, blocks, c_tiles);
            else
                weigh_values<2>(probs, kv_pad, packed_v, db, blocks, c_tiles);
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t j = 0; j < group; ++j) {
                    const __m512 o = _mm512_mul_ps(_mm512_loadu_ps(c_tiles + j * 256 + r * 16), _mm512_set1_ps(inv_sum[r]));
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
    const int64_t scratch_size = kv_pad * d + kRows * kv_pad * 3 / 2 + kRows * d / 2 + 4 * 256 + 16;
    parallel(a.batch * a.heads, 1, a.threads, [&](int64_t begin, int64_t end) {
        float* scratch = scratch_floats(scratch_size);
        products_begin();
        for (int64_t unit = begin; unit < end; ++unit) {
            const int64_t b = unit / a.heads, h = unit % a.heads;
            if (a.mask && a.mask_dtype == DType::bf16)
                attend<uint16_t>(a, b, h, scratch);
            else
                attend<float>(a, b, h, scratch);
        }
        products_end();
    });
}

}  // namespace

IPXC_REGISTER_KERNEL(attention, attention);

}  // namespace IPXC_NS
}  // namespace ipxc
