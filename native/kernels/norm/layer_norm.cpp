// layer_norm over the last dim, optionally of x + residual: y = (v - mean) / sqrt(var + eps) * gamma + beta.
// Statistics in fp32, two passes over the row (more accurate than one-pass sums of squares,
// and the row is in cache for the second pass). Optionally y is also quantized, while the row
// is in cache: the int8 layer after the norm reads that instead of running a quantize.
#include "norm_rows.h"
#include "quant.h"

namespace ipxc {
namespace IPXC_NS {

// Row r of y, as stored (so exactly the values a quantize node would read), quantized into a.q
// as quantize.cpp does it; with multipliers as quantize_last_axis.cpp does (the clamp bounds
// shifted by the zero point, so the product is rounded on its own and the zero point added
// exactly afterwards). The row was just written: it is read back from L1.
template <class T, class Q>
static void quantize_row(const NormArgs& a, int64_t r) {
    const int64_t n = a.cols;
    const T* __restrict y = static_cast<const T*>(a.y) + r * n;
    Q* __restrict q = static_cast<Q*>(a.q) + r * n;
    if (const float* __restrict m = a.q_multipliers) {
        const int32_t zp = a.q_zero_point;
        const float lo = QRange<Q>::lo - static_cast<float>(zp), hi = QRange<Q>::hi - static_cast<float>(zp);
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) q[i] = static_cast<Q>(round_clamp(load(y[i]) * m[i], lo, hi) + zp);
        return;
    }
    const float inv = 1.0f / a.q_scale, zp = static_cast<float>(a.q_zero_point);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
        q[i] = static_cast<Q>(round_clamp(fma_f32(load(y[i]), inv, zp), QRange<Q>::lo, QRange<Q>::hi));
}

#if IPXC_HAVE_AVX512BF16
// bf16 rows with AVX512-BF16: the same arithmetic as layer_norm_rows (x + residual rounded to
// bf16, two-pass statistics in fp32, the output rounded to nearest even), in three passes over
// the row with two accumulators each instead of five; measured 1.55x faster at 128 x 768. The
// sums are associated differently, so results may differ from the portable path in the last
// bits of the statistics. Which inputs and outputs a row has (residual, sum, gamma, beta, codes)
// are template arguments, and whole vectors go unmasked with one masked tail: the per-vector
// branches and masks had been a third of the instructions (BERT-base's 768-wide rows: 1.4x
// faster; benchmarks/results/session72-amx-notes.md).
template <bool Residual, bool Sum, bool Gamma, bool Beta, bool Codes>
static void layer_norm_rows_bf16(const NormArgs& a, int64_t begin, int64_t end) {
    const int64_t n = a.cols, whole = n / 16 * 16;
    const __mmask16 tail = lanes_below(n - whole);
    float* buf = scratch_floats(n);
    const __m512 zero = _mm512_setzero_ps();
    const Quantize16 quantize(a.q_multipliers, a.q_scale, a.q_zero_point, a.q_unsigned);
    for (int64_t r = begin; r < end; ++r) {
        const uint16_t* x = static_cast<const uint16_t*>(a.x) + r * n;
        const uint16_t* res = Residual ? static_cast<const uint16_t*>(a.residual) + r * n : nullptr;
        uint16_t* sum_out = Sum ? static_cast<uint16_t*>(a.sum) + r * n : nullptr;
        // x (+ residual, rounded to bf16) of 16 columns from i, into buf; the sum's bits stored too
        const auto input = [&](int64_t i, __mmask16 m) {
            __m512 v = load16(x + i, m);
            if constexpr (Residual) {
                const __m256i rounded = (__m256i)_mm512_cvtneps_pbh(_mm512_add_ps(v, load16(res + i, m)));
                if constexpr (Sum) _mm256_mask_storeu_epi16(sum_out + i, m, rounded);
                v = bf16_bits_to_f32(rounded);
            }
            _mm512_mask_storeu_ps(buf + i, m, v);
            return v;
        };
        __m512 sum0 = zero, sum1 = zero;
        int64_t i = 0;
        for (; i + 32 <= whole; i += 32) {
            sum0 = _mm512_add_ps(sum0, input(i, 0xFFFF));
            sum1 = _mm512_add_ps(sum1, input(i + 16, 0xFFFF));
        }
        for (; i < n; i += 16) {  // an odd last whole vector (even index: sum0), then the tail
            const __m512 v = input(i, i < whole ? static_cast<__mmask16>(0xFFFF) : tail);
            if ((i / 16) % 2) sum1 = _mm512_add_ps(sum1, v); else sum0 = _mm512_add_ps(sum0, v);
        }
        const float mean = _mm512_reduce_add_ps(_mm512_add_ps(sum0, sum1)) / static_cast<float>(n);
        const __m512 mean16 = _mm512_set1_ps(mean);
        __m512 sq0 = zero, sq1 = zero;
        for (i = 0; i + 32 <= whole; i += 32) {
            const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(buf + i), mean16);
            const __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(buf + i + 16), mean16);
            sq0 = _mm512_fmadd_ps(d0, d0, sq0);
            sq1 = _mm512_fmadd_ps(d1, d1, sq1);
        }
        for (; i < n; i += 16) {
            const __m512 d = _mm512_maskz_sub_ps(i < whole ? static_cast<__mmask16>(0xFFFF) : tail,
                                                 _mm512_loadu_ps(buf + i), mean16);
            if ((i / 16) % 2) sq1 = _mm512_fmadd_ps(d, d, sq1); else sq0 = _mm512_fmadd_ps(d, d, sq0);
        }
        const float var = _mm512_reduce_add_ps(_mm512_add_ps(sq0, sq1)) / static_cast<float>(n);
        const __m512 rstd = _mm512_set1_ps(1.0f / __builtin_sqrtf(var + a.eps));
        uint16_t* y = static_cast<uint16_t*>(a.y) + r * n;
        int8_t* q = Codes ? static_cast<int8_t*>(a.q) + r * n : nullptr;  // int8 or uint8: same bytes after the clamp
        const auto output = [&](int64_t j, __mmask16 m) {
            __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, buf + j), mean16), rstd);
            if constexpr (Gamma && Beta)
                v = _mm512_fmadd_ps(v, _mm512_maskz_loadu_ps(m, a.gamma + j), _mm512_maskz_loadu_ps(m, a.beta + j));
            else if constexpr (Gamma)
                v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, a.gamma + j));
            else if constexpr (Beta)
                v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, a.beta + j));
            const __m256i stored = (__m256i)_mm512_cvtneps_pbh(v);
            _mm256_mask_storeu_epi16(y + j, m, stored);
            if constexpr (Codes) _mm_mask_storeu_epi8(q + j, m, quantize(bf16_bits_to_f32(stored), j, m));
        };
        for (i = 0; i < whole; i += 16) output(i, 0xFFFF);
        if (whole < n) output(whole, tail);
    }
}

// The instance for this call's inputs and outputs (a sum only with a residual).
using RowsFn = void (*)(const NormArgs&, int64_t, int64_t);
template <bool Residual, bool Sum, bool Gamma, bool Beta>
static RowsFn bf16_rows_with_codes(bool codes) {
    return codes ? layer_norm_rows_bf16<Residual, Sum, Gamma, Beta, true> : layer_norm_rows_bf16<Residual, Sum, Gamma, Beta, false>;
}
template <bool Residual, bool Sum>
static RowsFn bf16_rows_with_affine(const NormArgs& a) {
    const bool codes = a.q != nullptr;
    if (a.gamma && a.beta) return bf16_rows_with_codes<Residual, Sum, true, true>(codes);
    if (a.gamma) return bf16_rows_with_codes<Residual, Sum, true, false>(codes);
    if (a.beta) return bf16_rows_with_codes<Residual, Sum, false, true>(codes);
    return bf16_rows_with_codes<Residual, Sum, false, false>(codes);
}
static RowsFn bf16_rows_for(const NormArgs& a) {
    if (a.residual == nullptr) return bf16_rows_with_affine<false, false>(a);
    return a.sum ? bf16_rows_with_affine<true, true>(a) : bf16_rows_with_affine<true, false>(a);
}
#endif

template <class T>
static void layer_norm_rows(const NormArgs& a, int64_t begin, int64_t end) {
    const int64_t n = a.cols;
    const float* __restrict gamma = a.gamma;
    const float* __restrict beta = a.beta;
    float* buf = scratch_floats(n);
    for (int64_t r = begin; r < end; ++r) {
        const float* v = norm_input_row<T>(a, r, buf);
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t i = 0; i < n; ++i) sum += v[i];
        const float mean = sum / static_cast<float>(n);
        float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
        for (int64_t i = 0; i < n; ++i) sq += (v[i] - mean) * (v[i] - mean);
        const float rstd = 1.0f / __builtin_sqrtf(sq / static_cast<float>(n) + a.eps);

        // out may alias v (both are buf for bf16): each element is read before it is written.
        float* out = norm_output_row<T>(a, r, buf);
        if (gamma && beta) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) out[i] = (v[i] - mean) * rstd * gamma[i] + beta[i];
        } else if (gamma) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) out[i] = (v[i] - mean) * rstd * gamma[i];
        } else {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) out[i] = (v[i] - mean) * rstd + (beta ? beta[i] : 0.0f);
        }
        norm_store_row<T>(a, r, out);
        if (a.q) a.q_unsigned ? quantize_row<T, uint8_t>(a, r) : quantize_row<T, int8_t>(a, r);
    }
}

static void layer_norm(const NormArgs& a) {
#if IPXC_HAVE_AVX512BF16
    const RowsFn bf16_rows = bf16_rows_for(a);
#endif
    parallel(a.rows, row_grain(a.cols), a.threads, [&](int64_t begin, int64_t end) {
        if (a.dtype == DType::bf16)
#if IPXC_HAVE_AVX512BF16
            bf16_rows(a, begin, end);
#else
            layer_norm_rows<uint16_t>(a, begin, end);
#endif
        else
            layer_norm_rows<float>(a, begin, end);
    });
}

IPXC_REGISTER_KERNEL(layer_norm, layer_norm);

}  // namespace IPXC_NS
}  // namespace ipxc
