// decode_attention: a few query rows against the whole cache, in float32. The query heads that share a
// key/value head (grouped-query attention: 7 per kv head in Qwen2-0.5B) are handled together, so each key
// and value row is read from memory once per step and feeds every head of the group: the scores of every
// key (a dot product per head), their softmax (exp_approx, ~2 ulp), then the value rows weighted by it.
// Parallel over (batch, kv head, query row), and over slices of the group's heads when those are fewer
// than the threads. Meant for decode steps; longer prompts go to the blocked kernels. An int8 cache (rows of
// codes and a float32 scale: ir/ops/_kv_int8.py) is read as codes, its scales applied to each score and weight.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "common.h"
#include "ipxc/parallel.h"
#include "vec16.h"

namespace ipxc {
namespace IPXC_NS {

// D: the head size when it is one of the common ones (the compiler then keeps a row in registers), or 0
// for any other (the runtime size a.head_dim).
template <int D>
struct HeadDim {
    static int64_t of(const DecodeAttentionArgs&) { return D; }
};
template <>
struct HeadDim<0> {
    static int64_t of(const DecodeAttentionArgs& a) { return a.head_dim; }
};

// The scale of a cache row of d values: an int8 row's float32 after its codes, 1 for float rows.
template <class T>
static inline float row_scale(const T* row, int64_t d) {
    if constexpr (std::is_same_v<T, int8_t>) {
        float scale;
        std::memcpy(&scale, row + d, sizeof scale);
        return scale;
    } else {
        return 1.0f;
    }
}

// A row of d values as float32: float rows in place, bf16 rows converted and int8 rows dequantized into `buf`.
template <class T>
static inline const float* f32_row(const T* src, float* buf, int64_t d) {
    if constexpr (sizeof(T) == 4) {
        return reinterpret_cast<const float*>(src);
    } else if constexpr (std::is_same_v<T, int8_t>) {
        const float scale = row_scale(src, d);
#pragma omp simd
        for (int64_t i = 0; i < d; ++i) buf[i] = static_cast<float>(src[i]) * scale;
        return buf;
    } else {
#pragma omp simd
        for (int64_t i = 0; i < d; ++i) buf[i] = load(src[i]);
        return buf;
    }
}

// Rows ahead of the one in use whose cache lines are requested early (8 KiB of float32 rows at D = 64): a decode
// step's weight stream has evicted the cache, and the hardware prefetcher alone left each unit waiting for its rows.
// A Qwen2-0.5B layer at 530 cached positions, 2 threads, rows not in cache: 49-58 us without, 36-43 with (8 rows
// ahead: no gain; 64: no better); the step's attention 1.56-1.88 -> 1.17-1.57 ms a token (session 35 results).
constexpr int64_t kPrefetchKeyRows = 32;

template <class T, int D>
static inline void prefetch_row(const T* row) {
    constexpr int kBytes = D * static_cast<int>(sizeof(T)) + (std::is_same_v<T, int8_t> ? 4 : 0);
    for (int b = 0; b < kBytes; b += 64) __builtin_prefetch(reinterpret_cast<const char*>(row) + b);
}

#if IPXC_HAVE_AVX512
// The sums of 16 vectors' lanes, as one vector (lane k: the sum of a[k]'s 16 lanes): 45 instructions for 16 sums,
// where a horizontal sum each costs ~9 and waits on its own chain.
static inline __m512 sum_lanes_16(const __m512 a[16]) {
    __m512 pairs[8], quads[4];
    for (int m = 0; m < 8; ++m)  // per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3] of keys 2m, 2m+1
        pairs[m] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * m], a[2 * m + 1]),
                                 _mm512_unpackhi_ps(a[2 * m], a[2 * m + 1]));
    for (int p = 0; p < 4; ++p) {  // per 128-bit lane L: keys 4p .. 4p+3's sums over lane L
        const __m512d c = _mm512_castps_pd(pairs[2 * p]), d = _mm512_castps_pd(pairs[2 * p + 1]);
        quads[p] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(c, d)),
                                 _mm512_castpd_ps(_mm512_unpackhi_pd(c, d)));
    }
    // the four 128-bit lanes of each quad summed, quad p landing in lane p
    const __m512 u01 = _mm512_add_ps(_mm512_shuffle_f32x4(quads[0], quads[1], 0x44),
                                     _mm512_shuffle_f32x4(quads[0], quads[1], 0xee));
    const __m512 u23 = _mm512_add_ps(_mm512_shuffle_f32x4(quads[2], quads[3], 0x44),
                                     _mm512_shuffle_f32x4(quads[2], quads[3], 0xee));
    return _mm512_add_ps(_mm512_shuffle_f32x4(u01, u23, 0x88), _mm512_shuffle_f32x4(u01, u23, 0xdd));
}

// Scores of whole blocks of 16 keys of a bf16 or int8 cache: each block's rows widened once into `stage` (16 x D
// floats), then per head 16 dot products kept as vectors and summed together (sum_lanes_16), an int8 block's 16
// row scales applied as one vector. Returns the keys done (a multiple of 16); the rest go one by one. Qwen2-0.5B at
// 4000 int8 positions, caches evicted, 2 threads: 0.89 x the per-key sums' time (benchmarks/decode_attention.py).
template <class T, int D>
static int64_t scores_blocks(const float* q, int64_t g, const T* k, int64_t k_stride, int64_t n, float* scores,
                             float* stage) {
    constexpr int C = D / 16;
    int64_t j0 = 0;
    for (; j0 + 16 <= n; j0 += 16) {
        alignas(64) float scale[16];
        for (int r = 0; r < 16; ++r) {
            const T* krow = k + (j0 + r) * k_stride;
            if (j0 + r + kPrefetchKeyRows < n) prefetch_row<T, D>(krow + kPrefetchKeyRows * k_stride);
            for (int c = 0; c < C; ++c) _mm512_storeu_ps(stage + r * D + 16 * c, v_load(krow + 16 * c).v);
            scale[r] = row_scale(krow, D);
        }
        for (int64_t i = 0; i < g; ++i) {
            const float* qi = q + i * D;
            __m512 qv[C], acc[16];
            for (int c = 0; c < C; ++c) qv[c] = _mm512_loadu_ps(qi + 16 * c);
            for (int r = 0; r < 16; ++r) {
                const float* row = stage + r * D;
                acc[r] = _mm512_mul_ps(qv[0], _mm512_loadu_ps(row));
                for (int c = 1; c < C; ++c) acc[r] = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(row + 16 * c), acc[r]);
            }
            __m512 sums = sum_lanes_16(acc);
            if constexpr (std::is_same_v<T, int8_t>) sums = _mm512_mul_ps(sums, _mm512_load_ps(scale));
            _mm512_storeu_ps(scores + i * n + j0, sums);
        }
    }
    return j0;
}
#elif IPXC_V16_AVX2
// The sums of 8 vectors' lanes, as one vector (lane k: the sum of a[k]'s 8 lanes).
static inline __m256 sum_lanes_8(const __m256 a[8]) {
    // per 128-bit half: [a0, a1, a2, a3]'s sums over that half's 4 lanes (and a4 .. a7 alike)
    const __m256 q0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    const __m256 q1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(q0, q1, 0x20), _mm256_permute2f128_ps(q0, q1, 0x31));
}

// scores_blocks for AVX2: blocks of 8 keys (8 accumulators and the query's chunk in 9 of the 16 registers).
template <class T, int D>
static int64_t scores_blocks(const float* q, int64_t g, const T* k, int64_t k_stride, int64_t n, float* scores,
                             float* stage) {
    constexpr int C = D / 8;  // 8-float chunks of a row
    int64_t j0 = 0;
    for (; j0 + 8 <= n; j0 += 8) {
        alignas(32) float scale[8];
        for (int r = 0; r < 8; ++r) {
            const T* krow = k + (j0 + r) * k_stride;
            if (j0 + r + kPrefetchKeyRows < n) prefetch_row<T, D>(krow + kPrefetchKeyRows * k_stride);
            for (int c = 0; c < D / 16; ++c) {
                const V16 x = v_load(krow + 16 * c);
                _mm256_storeu_ps(stage + r * D + 16 * c, x.a);
                _mm256_storeu_ps(stage + r * D + 16 * c + 8, x.b);
            }
            scale[r] = row_scale(krow, D);
        }
        for (int64_t i = 0; i < g; ++i) {
            const float* qi = q + i * D;
            __m256 acc[8];
            for (int r = 0; r < 8; ++r) acc[r] = _mm256_setzero_ps();
            for (int c = 0; c < C; ++c) {
                const __m256 qc = _mm256_loadu_ps(qi + 8 * c);
                for (int r = 0; r < 8; ++r)
                    acc[r] = _mm256_fmadd_ps(qc, _mm256_loadu_ps(stage + r * D + 8 * c), acc[r]);
            }
            __m256 sums = sum_lanes_8(acc);
            if constexpr (std::is_same_v<T, int8_t>) sums = _mm256_mul_ps(sums, _mm256_load_ps(scale));
            _mm256_storeu_ps(scores + i * n + j0, sums);
        }
    }
    return j0;
}
#endif

// The head sizes that are whole V16 vectors (64, 128): every key row is loaded into registers once and
// dotted with each head's query there (one horizontal sum per head and key; a bf16 or int8 cache's whole blocks
// of 16 keys (AVX-512) or 8 (AVX2) go through scores_blocks), and the heads' value sums stay in registers across
// all keys (heads in batches the register file holds).
template <class T, int D>
static void scores_v16(const float* q, int64_t g, const T* k, int64_t k_stride, int64_t n, float* scores,
                       float* stage) {
    constexpr int C = D / 16;
    int64_t j = 0;
#if IPXC_HAVE_AVX512 || IPXC_V16_AVX2
    // (float32 rows stay on the per-key path: no gain measured from blocks, their time is the read)
    if constexpr (sizeof(T) < 4) j = scores_blocks<T, D>(q, g, k, k_stride, n, scores, stage);
#else
    (void)stage;
#endif
    for (; j < n; ++j) {
        const T* krow = k + j * k_stride;
        if (j + kPrefetchKeyRows < n) prefetch_row<T, D>(krow + kPrefetchKeyRows * k_stride);
        V16 kz[C];
        for (int c = 0; c < C; ++c) kz[c] = v_load(krow + 16 * c);
        for (int64_t i = 0; i < g; ++i) {
            const float* qi = q + i * D;
            V16 acc = v_mul(v_load(qi), kz[0]);
            for (int c = 1; c < C; ++c) acc = v_fma(v_load(qi + 16 * c), kz[c], acc);
            scores[i * n + j] = v_sum(acc);
        }
        if constexpr (std::is_same_v<T, int8_t>) {  // the row's codes times its scale
            const float scale = row_scale(krow, D);
            for (int64_t i = 0; i < g; ++i) scores[i * n + j] *= scale;
        }
    }
}

template <class T, int D, int H>
static void values_v16_heads(const float* p, int64_t n, const T* v, int64_t v_stride, float* acc) {
    constexpr int C = D / 16;
    V16 sum[H][C];
    for (int i = 0; i < H; ++i)
        for (int c = 0; c < C; ++c) sum[i][c] = v_zero();
    for (int64_t j = 0; j < n; ++j) {
        const T* vrow = v + j * v_stride;
        if (j + kPrefetchKeyRows < n) prefetch_row<T, D>(vrow + kPrefetchKeyRows * v_stride);
        V16 vz[C];
        for (int c = 0; c < C; ++c) vz[c] = v_load(vrow + 16 * c);
        const float scale = row_scale(vrow, D);  // (1 for float rows: folded away)
        for (int i = 0; i < H; ++i) {
            const V16 w = v_set1(p[i * n + j] * scale);
            for (int c = 0; c < C; ++c) sum[i][c] = v_fma(w, vz[c], sum[i][c]);
        }
    }
    for (int i = 0; i < H; ++i)
        for (int c = 0; c < C; ++c) v_store(acc + i * D + 16 * c, sum[i][c]);
}

template <class T, int D>
static void values_v16(const float* p, int64_t g, const T* v, int64_t v_stride, int64_t n, float* acc) {
    constexpr int C = D / 16;
    constexpr int H = (kV16Registers - C) / C > 0 ? (kV16Registers - C) / C : 1;  // heads a pass keeps in registers
    int64_t i = 0;
    for (; i + H <= g; i += H) values_v16_heads<T, D, H>(p + i * n, n, v, v_stride, acc + i * D);
    for (; i < g; ++i) values_v16_heads<T, D, 1>(p + i * n, n, v, v_stride, acc + i * D);
}

// One unit: query row t of heads [h0, h0 + g) of batch b, all reading kv head kvh.
// scratch: q [g][d] (scaled), acc [g][d], scores [g][kv_len], one bf16 row as float32 [d], 16 rows as float32.
template <class Q, class T, class M, int D>
static void attend_group(const DecodeAttentionArgs& a, int64_t b, int64_t kvh, int64_t t, int64_t h0, int64_t g,
                         float* scratch) {
    const int64_t d = HeadDim<D>::of(a), n = a.kv_len;
    float* q = scratch;
    float* acc = q + g * d;
    float* scores = acc + g * d;
    float* row = scores + g * n;
    float* stage = row + d;
    for (int64_t i = 0; i < g; ++i) {
        const Q* qrow = static_cast<const Q*>(a.q) + b * a.q_strides[0] + (h0 + i) * a.q_strides[1] + t * a.q_strides[2];
        for (int64_t c = 0; c < d; ++c) q[i * d + c] = load(qrow[c]) * a.scale;
    }
    const T* k = static_cast<const T*>(a.k) + b * a.k_strides[0] + kvh * a.k_strides[1];
    const T* v = static_cast<const T*>(a.v) + b * a.v_strides[0] + kvh * a.v_strides[1];

    // Scores: each key row converted once, dotted with every head's query.
    if constexpr (D > 0 && D % 16 == 0) {
        scores_v16<T, D>(q, g, k, a.k_strides[2], n, scores, stage);
    } else {
        for (int64_t j = 0; j < n; ++j) {
            const float* kf = f32_row(k + j * a.k_strides[2], row, d);
            for (int64_t i = 0; i < g; ++i) {
                const float* qi = q + i * d;
                float s = 0.0f;
#pragma omp simd reduction(+ : s)
                for (int64_t c = 0; c < d; ++c) s += qi[c] * kf[c];
                scores[i * n + j] = s;
            }
        }
    }
    // Masks, softmax (a fully masked row stays zeros).
    float inv_sum[64];  // g <= 64 (the caller slices bigger groups)
    for (int64_t i = 0; i < g; ++i) {
        float* s = scores + i * n;
        if (a.mask) {
            const M* m = static_cast<const M*>(a.mask) + b * a.mask_strides[0] + (h0 + i) * a.mask_strides[1] +
                         t * a.mask_strides[2];
#pragma omp simd
            for (int64_t j = 0; j < n; ++j) s[j] += load(m[j]);
        }
        float row_max = -INFINITY;
#pragma omp simd reduction(max : row_max)
        for (int64_t j = 0; j < n; ++j) row_max = s[j] > row_max ? s[j] : row_max;
        inv_sum[i] = 0.0f;
        if (row_max == -INFINITY) {
            for (int64_t j = 0; j < n; ++j) s[j] = 0.0f;
            continue;
        }
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < n; ++j) {
            s[j] = exp_approx(s[j] - row_max);  // the largest is 1; masked keys give 0
            sum += s[j];
        }
        inv_sum[i] = 1.0f / sum;
    }
    // Values: each value row converted once, added to every head's sum with that head's weight.
    if constexpr (D > 0 && D % 16 == 0) {
        values_v16<T, D>(scores, g, v, a.v_strides[2], n, acc);
    } else {
        for (int64_t c = 0; c < g * d; ++c) acc[c] = 0.0f;
        for (int64_t j = 0; j < n; ++j) {
            const float* vf = f32_row(v + j * a.v_strides[2], row, d);
            for (int64_t i = 0; i < g; ++i) {
                const float w = scores[i * n + j];
                float* ai = acc + i * d;
#pragma omp simd
                for (int64_t c = 0; c < d; ++c) ai[c] += w * vf[c];
            }
        }
    }
    for (int64_t i = 0; i < g; ++i) {
        float* ai = acc + i * d;
        for (int64_t c = 0; c < d; ++c) ai[c] *= inv_sum[i];
        Q* out = static_cast<Q*>(a.out) + b * a.out_strides[0] + (h0 + i) * a.out_strides[1] + t * a.out_strides[2];
        if constexpr (sizeof(Q) == 4) {
            for (int64_t c = 0; c < d; ++c) out[c] = ai[c];
        } else {
            f32_row_to_bf16(ai, out, d);
        }
    }
}

template <class Q, class T, class M>
static void attend(const DecodeAttentionArgs& a, int64_t b, int64_t kvh, int64_t t, int64_t h0, int64_t g, float* scratch) {
    switch (a.head_dim) {
        case 64: return attend_group<Q, T, M, 64>(a, b, kvh, t, h0, g, scratch);
        case 128: return attend_group<Q, T, M, 128>(a, b, kvh, t, h0, g, scratch);
        default: return attend_group<Q, T, M, 0>(a, b, kvh, t, h0, g, scratch);
    }
}

// q / out type Q, key / value type T (a bfloat16 cache beside float32 q, or int8 rows), mask type M.
template <class Q, class T>
static void attend_masked(const DecodeAttentionArgs& a, int64_t b, int64_t kvh, int64_t t, int64_t h0, int64_t g,
                          float* scratch) {
    if (a.mask && a.mask_dtype == DType::bf16) attend<Q, T, uint16_t>(a, b, kvh, t, h0, g, scratch);
    else attend<Q, T, float>(a, b, kvh, t, h0, g, scratch);
}

static void decode_attention(const DecodeAttentionArgs& a) {
    const int64_t group = a.heads / a.kv_heads;
    const int64_t rows = a.batch * a.kv_heads * a.q_len;
    // Slices of a group: enough units for the threads, at most 64 heads a slice.
    int64_t slices = (a.threads + rows - 1) / rows;
    if (slices < (group + 63) / 64) slices = (group + 63) / 64;
    if (slices > group) slices = group;
    const int64_t per_slice = (group + slices - 1) / slices;
    slices = (group + per_slice - 1) / per_slice;
    const int64_t scratch_size = per_slice * (2 * a.head_dim + a.kv_len) + 17 * a.head_dim;
    parallel(rows * slices, 1, a.threads, [&](int64_t begin, int64_t end) {
        float* scratch = scratch_floats(scratch_size);
        for (int64_t unit = begin; unit < end; ++unit) {
            const int64_t slice = unit % slices, row = unit / slices;
            const int64_t t = row % a.q_len, kvh = (row / a.q_len) % a.kv_heads, b = row / (a.q_len * a.kv_heads);
            const int64_t h0 = kvh * group + slice * per_slice;
            const int64_t g = per_slice < group - slice * per_slice ? per_slice : group - slice * per_slice;
            if (a.kv_dtype == DType::s8_rows) {
                if (a.dtype == DType::bf16) attend_masked<uint16_t, int8_t>(a, b, kvh, t, h0, g, scratch);
                else attend_masked<float, int8_t>(a, b, kvh, t, h0, g, scratch);
            } else if (a.dtype == DType::bf16) {
                attend_masked<uint16_t, uint16_t>(a, b, kvh, t, h0, g, scratch);
            } else if (a.kv_dtype == DType::bf16) {
                attend_masked<float, uint16_t>(a, b, kvh, t, h0, g, scratch);
            } else {
                attend_masked<float, float>(a, b, kvh, t, h0, g, scratch);
            }
        }
    });
}

IPXC_REGISTER_KERNEL(decode_attention, decode_attention);

}  // namespace IPXC_NS
}  // namespace ipxc
