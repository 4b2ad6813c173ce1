// attention_f32: softmax(q k^T * scale + mask) v with fp32 q/k/v/out, computed in fp32, built
// for the avx2 and avx512 levels (the levels above avx512 run its avx512 build), written once over
// V16 (vec16.h); only the register blocking and the quantized store differ per level.
//
// Per (batch, head): K is transposed once into Kt [head_dim][kv_pad] (kv_pad: kv_len rounded
// up to 32, zeros past kv_len), so a block of scores is a broadcast query value times
// contiguous key vectors; V is read in place. Each block of kRows queries computes S = Q K^T in
// registers (kRows rows x kScoreVectors vectors of 16 keys), P = e^(S * scale + mask - rowmax) in
// place, O = P V in registers (kRows rows x up to kValueVectors vectors of 16 dims) and stores
// O / rowsum, as fp32 or, for an int8 layer after attention, as the codes the quantize node would
// make of it; a row whose every key the mask removes is stored as 0 (as the op promises). q/k/v
// rows may be strided (slices of a packed QKV projection), out rows too (a [batch, seq, heads,
// head_dim] buffer). The bf16 kernel (attention.cpp) has the same shape; this
// one keeps every value in fp32, so it serves fp32 models, where torch's CPU attention runs at
// about a quarter of the FMA peak at BERT and MiniLM shapes.
#include <type_traits>

#include "attention_simd.h"
#include "common.h"
#include "quant.h"
#include "vec16.h"

namespace ipxc {
namespace IPXC_NS {
namespace {

constexpr int64_t kRows = 6;  // queries per block
#if IPXC_HAVE_AVX512
// 6 rows x 4 vectors = 24 accumulators, 4 key (value) vectors and a broadcast: 29 of 32 zmm.
constexpr int kScoreVectors = 4, kValueVectors = 4;
#else
// A V16 is two ymm: 6 rows x 1 vector = 12 accumulators, 2 for keys (values), 1 broadcast: 15 of 16 ymm
// (4 rows x 2 vectors would need 16 + 4 + 1 and spill).
constexpr int kScoreVectors = 1, kValueVectors = 1;
#endif
constexpr int64_t kKeyPad = 32;  // kv_pad multiple: the softmax takes 2 vectors a step
static_assert(kScoreVectors == 1 || kScoreVectors == 2 || kScoreVectors == 4,
              "steps of 16 or 32 keys divide kv_pad; after steps of 64 one of 32 may be left");

#if IPXC_HAVE_AVX512
using Quantizer = Quantize16;
// The 16 codes of y (channels channel .. channel + 15).
void store_codes(const Quantize16& quantize, V16 y, int64_t channel, int8_t* codes) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes), quantize(y.v, channel, 0xFFFF));
}
#else
using Quantizer = QuantizeOne;
void store_codes(const QuantizeOne& quantize, V16 y, int64_t channel, int8_t* codes) {
    float values[16];
    v_store(values, y);
    for (int i = 0; i < 16; ++i) codes[i] = quantize(values[i], channel + i);
}
#endif

// Kt[c][j] = K[j][c] for j < kv_len, 0 up to kv_pad.
void transpose_keys(const float* k, int64_t row_stride, int64_t kv_len, int64_t kv_pad, int64_t head_dim, float* kt) {
    V16 m[16];
    for (int64_t j0 = 0; j0 < kv_pad; j0 += 16)
        for (int64_t c0 = 0; c0 < head_dim; c0 += 16) {
            for (int64_t n = 0; n < 16; ++n) m[n] = j0 + n < kv_len ? v_load(k + (j0 + n) * row_stride + c0) : v_zero();
            v_transpose_16x16(m);
            for (int p = 0; p < 16; ++p) v_store(kt + (c0 + p) * kv_pad + j0, m[p]);
        }
}

// scores[r][j0, j0 + 16 V) = sum over c of q_rows[r][c] * Kt[c][j0 ..], for the kRows rows.
template <int V>
void score_keys(const float* const* q_rows, const float* kt, int64_t kv_pad, int64_t head_dim, int64_t j0,
                float* scores) {
    V16 acc[kRows][V];
    for (int r = 0; r < kRows; ++r)
        for (int v = 0; v < V; ++v) acc[r][v] = v_zero();
    for (int64_t c = 0; c < head_dim; ++c) {
        const float* kt_row = kt + c * kv_pad + j0;
        V16 keys[V];
        for (int v = 0; v < V; ++v) keys[v] = v_load(kt_row + 16 * v);
        for (int r = 0; r < kRows; ++r) {
            const V16 q = v_set1(q_rows[r][c]);
            for (int v = 0; v < V; ++v) acc[r][v] = v_fma(q, keys[v], acc[r][v]);
        }
    }
    for (int r = 0; r < kRows; ++r)
        for (int v = 0; v < V; ++v) v_store(scores + r * kv_pad + j0 + 16 * v, acc[r][v]);
}

// One row of P = e^(s * scale + mask - max) over kv_len keys, in place, zeros up to kv_pad;
// returns 1 / sum(P). As in the bf16 kernel (and torch's flash attention) P's largest value is
// 1 and the division happens once, on the output.
template <class M>
float softmax_row(float* __restrict s, const M* __restrict mask, float scale, int64_t kv_len, int64_t kv_pad) {
    const float row_max = scale_mask_max(s, mask, scale, kv_len, kv_pad);
    return exp_and_sum(s, row_max, kv_pad, [&](int64_t j, V16 a, V16 b) {
        v_store(s + j, a);
        v_store(s + j + 16, b);
    });
}

// store(r, d0 + 16 i, O[r][d0 + 16 i ..] / rowsum) where O[r] = sum over j < kv_len of P[r][j] V[j],
// for the first `rows` rows (the other rows of P are zeros).
template <int V, class Store>
void weigh_values(const float* p, int64_t kv_pad, const float* v, int64_t v_stride, int64_t kv_len, int64_t d0,
                  const float* inv_sum, int64_t rows, const Store& store) {
    V16 acc[kRows][V];
    for (int r = 0; r < kRows; ++r)
        for (int i = 0; i < V; ++i) acc[r][i] = v_zero();
    for (int64_t j = 0; j < kv_len; ++j) {
        const float* v_row = v + j * v_stride + d0;
        V16 values[V];
        for (int i = 0; i < V; ++i) values[i] = v_load(v_row + 16 * i);
        for (int r = 0; r < kRows; ++r) {
            const V16 weight = v_set1(p[r * kv_pad + j]);
            for (int i = 0; i < V; ++i) acc[r][i] = v_fma(weight, values[i], acc[r][i]);
        }
    }
    for (int64_t r = 0; r < rows; ++r)
        for (int i = 0; i < V; ++i) store(r, d0 + 16 * i, v_mul(acc[r][i], v_set1(inv_sum[r])));
}

// Vectors of head dims in one weigh_values step, capped at kValueVectors: the switch in attend never asks for
// more, and the cap keeps the wider steps, which would spill, from being compiled at all on AVX2.
constexpr int value_vectors(int v) { return v < kValueVectors ? v : kValueVectors; }

// Keys [0, n) that can carry weight for mask rows [0, rows): past the last key some row does not mask with -inf,
// every score is e^-inf = 0, so the block computes nothing there (a causal prompt's future keys, a padded
// batch's padding). kv_len without a mask, and for a block whose every row is masked out entirely (such rows are
// stored as 0).
// Rows go last to first (a causal block's last row reaches furthest, so the others stop at once), each scanned
// from its end 16 keys a compare while all 16 are -inf: a 512-token causal prompt scanned one key at a time
// cost ~15 % of its attention.
template <class M>
int64_t live_keys(const M* mask, int64_t mask_row_stride, int64_t rows, int64_t kv_len) {
    if (mask == nullptr) return kv_len;
    int64_t live = 0;
    for (int64_t r = rows - 1; r >= 0 && live < kv_len; --r) {
        const M* m = mask + r * mask_row_stride;
        int64_t j = kv_len;
        while (j - 16 >= live && v_all_equal(v_load(m + j - 16), -__builtin_inff())) j -= 16;
        while (j > live && load(m[j - 1]) == -__builtin_inff()) --j;
        live = j > live ? j : live;
    }
    return live > 0 ? live : kv_len;
}

// One (batch, head): every block of kRows queries.
template <class M>
void attend(const AttentionArgs& a, int64_t b, int64_t h, float* scratch) {
    const int64_t d = a.head_dim, kv_len = a.kv_len, kv_pad = (kv_len + kKeyPad - 1) / kKeyPad * kKeyPad;
    float* kt = scratch;               // d x kv_pad
    float* scores = kt + d * kv_pad;   // kRows x kv_pad: S, then P
    const float* q = head_at<const float>(a.q, a.q_strides, b, h);
    const int64_t kvh = a.kv_heads > 0 ? h / (a.heads / a.kv_heads) : h;  // grouped-query heads share k and v
    const float* k = head_at<const float>(a.k, a.k_strides, b, kvh);
    const float* v = head_at<const float>(a.v, a.v_strides, b, kvh);
    float* out = head_at<float>(a.out, a.out_strides, b, h);
    int8_t* out_codes = head_at<int8_t>(a.out, a.out_strides, b, h);  // when quantized
    const Quantizer quantize(a.q_multipliers, a.q_scale, a.q_zero_point, a.q_unsigned);
    const M* mask = a.mask ? head_at<const M>(a.mask, a.mask_strides, b, h) : nullptr;
    transpose_keys(k, a.k_strides[2], kv_len, kv_pad, d, kt);

    for (int64_t q0 = 0; q0 < a.q_len; q0 += kRows) {
        const int64_t rows = a.q_len - q0 < kRows ? a.q_len - q0 : kRows;
        const float* q_rows[kRows];
        for (int64_t r = 0; r < kRows; ++r)  // a tail block repeats its last row: computed, never stored
            q_rows[r] = q + (q0 + (r < rows ? r : rows - 1)) * a.q_strides[2];
        bool removed[kRows] = {};  // rows the mask removes entirely: stored as 0 (their softmax is NaN)
        // Output row r, dims [col, col + 16): fp32, or the codes the quantize node would make of them.
        const auto store = [&](int64_t r, int64_t col, V16 o) {
            const int64_t at = (q0 + r) * a.out_strides[2] + col;
            if (removed[r]) o = v_zero();
            if (a.quantized)
                store_codes(quantize, o, h * d + col, out_codes + at);
            else
                v_store(out + at, o);
        };
        const M* block_mask = mask ? mask + q0 * a.mask_strides[2] : nullptr;
        const int64_t live = live_keys(block_mask, a.mask_strides[2], rows, kv_len);
        const int64_t live_pad = (live + kKeyPad - 1) / kKeyPad * kKeyPad;
        int64_t j0 = 0;
        for (; j0 + 16 * kScoreVectors <= live_pad; j0 += 16 * kScoreVectors)
            score_keys<kScoreVectors>(q_rows, kt, kv_pad, d, j0, scores);
        if constexpr (kScoreVectors == 4)
            if (j0 < live_pad) score_keys<2>(q_rows, kt, kv_pad, d, j0, scores);  // the last 32 keys
        float inv_sum[kRows] = {};
        for (int64_t r = 0; r < rows; ++r) {
            const M* row_mask = block_mask ? block_mask + r * a.mask_strides[2] : nullptr;
            inv_sum[r] = softmax_row(scores + r * kv_pad, row_mask, a.scale, live, live_pad);
            // (past `live` every row's mask is -inf, so the first live keys decide)
            removed[r] = row_mask && !(inv_sum[r] > 0.0f) && removes_every_key(row_mask, live);
        }
        if (rows < kRows) std::memset(scores + rows * kv_pad, 0, sizeof(float) * (kRows - rows) * kv_pad);
        // O in steps of up to kValueVectors vectors of head dims, the count a template argument (the step's
        // accumulators stay in registers).
        int64_t d0 = 0;
        const auto weigh = [&](auto vectors) {
            constexpr int V = decltype(vectors)::value;
            weigh_values<V>(scores, kv_pad, v, a.v_strides[2], live, d0, inv_sum, rows, store);
            d0 += 16 * V;
        };
        while (d0 < d) {
            switch ((d - d0) / 16 >= kValueVectors ? kValueVectors : (d - d0) / 16) {
                case 4: weigh(std::integral_constant<int, value_vectors(4)>{}); break;
                case 3: weigh(std::integral_constant<int, value_vectors(3)>{}); break;
                case 2: weigh(std::integral_constant<int, value_vectors(2)>{}); break;
                default: weigh(std::integral_constant<int, 1>{}); break;
            }
        }
    }
}

void attention_f32(const AttentionArgs& a) {
    const int64_t kv_pad = (a.kv_len + kKeyPad - 1) / kKeyPad * kKeyPad;
    const int64_t scratch_size = (a.head_dim + kRows) * kv_pad;
    parallel(a.batch * a.heads, 1, a.threads, [&](int64_t begin, int64_t end) {
        float* scratch = scratch_floats(scratch_size);
        for (int64_t unit = begin; unit < end; ++unit) {
            const int64_t b = unit / a.heads, h = unit % a.heads;
            if (a.mask && a.mask_dtype == DType::bf16)
                attend<uint16_t>(a, b, h, scratch);
            else
                attend<float>(a, b, h, scratch);
        }
    });
}

}  // namespace

IPXC_REGISTER_KERNEL(attention_f32, attention_f32);

}  // namespace IPXC_NS
}  // namespace ipxc
