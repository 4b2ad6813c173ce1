// erfc(z) for z >= 0 as 1 / P(z)^16 (Abramowitz & Stegun 7.1.28, |error| < 3e-7): one division and no exp, so
// cheaper than forms built on e^(-z^2). The erf GELU uses it for both signs, 0.5 x erfc(-x / sqrt 2), which avoids
// the cancellation in 1 + erf(x) where the GELU is tiny; P^16 overflowing to inf gives 0. Shared by the gelu kernel
// and the epilogues that apply a GELU in registers (int8_gemm), so both compute the same values.
#pragma once

namespace ipxc {

// P(z) = 1 + a1 z + ... + a6 z^6, highest power first (Horner order).
constexpr float kErfcPoly[7] = {0.0000430638f, 0.0002765672f, 0.0001520143f, 0.0092705272f,
                                0.0422820123f, 0.0705230784f, 1.0f};
constexpr float kInvSqrt2 = 0.70710678118654752f;

}  // namespace ipxc
