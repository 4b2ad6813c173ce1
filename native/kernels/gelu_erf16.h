// The erf GELU of 16 floats in an AVX-512 register, gelu_erfc.h's arithmetic (the gelu kernel's values), for the
// AVX-512 epilogues (bf16_amx_gemm, int8_amx_gemm). NaN stays NaN. Include after common.h: it lives in the level's
// namespace, since each level compiles it with its own flags.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

#include "gelu_erfc.h"

namespace ipxc {
namespace IPXC_NS {

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

}  // namespace IPXC_NS
}  // namespace ipxc
#endif
