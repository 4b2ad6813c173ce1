// Argument checks every direct oneDNN layer runs before a primitive touches memory: geometry
// parameters in range, sizes multiplied without overflow, and the output size of a window over
// an input. A failed check throws std::invalid_argument (a ValueError in Python). All of it is a
// few integer compares per call.
#pragma once

#include <dnnl.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace ipxc_dnnl {

// The largest size along any dim, and any geometry parameter, the layers take: oneDNN's kernels
// index many of these with 32-bit ints.
constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();

[[noreturn]] inline void invalid(const std::string& message) { throw std::invalid_argument(message); }

inline int64_t checked_mul(int64_t a, int64_t b, const char* what) {
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) invalid(std::string(what) + " overflows 64 bits");
    return r;
}

inline int64_t checked_add(int64_t a, int64_t b, const char* what) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) invalid(std::string(what) + " overflows 64 bits");
    return r;
}

// `value` (named `what`) within [lo, kMaxDim].
inline void check_range(int64_t value, int64_t lo, const std::string& what) {
    if (value < lo || value > kMaxDim)
        invalid(what + " is " + std::to_string(value) + "; it must be in [" + std::to_string(lo) + ", " +
                std::to_string(kMaxDim) + "]");
}

// kernel, stride, padding, dilation of a window along one spatial axis.
inline void check_window(int64_t kernel, int64_t stride, int64_t padding, int64_t dilation, const std::string& axis) {
    check_range(kernel, 1, "kernel " + axis);
    check_range(stride, 1, "stride " + axis);
    check_range(padding, 0, "padding " + axis);
    check_range(dilation, 1, "dilation " + axis);
}

// Output size of a convolution or pooling along one axis (symmetric padding); the padded input
// must hold the dilated kernel at least once (else the division below would round a negative up).
inline int64_t out_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation) {
    check_range(in, 1, "the input size");
    const int64_t padded = checked_add(in, checked_mul(2, pad, "the padding"), "the padded input size");
    const int64_t extent = checked_add(checked_mul(dilation, kernel - 1, "the kernel extent"), 1, "the kernel extent");
    if (padded > kMaxDim) invalid("the padded input size " + std::to_string(padded) + " is too large");
    if (padded < extent)
        invalid("the input size " + std::to_string(in) + " (padded: " + std::to_string(padded) +
                ") is smaller than the kernel's extent " + std::to_string(extent));
    return (padded - extent) / stride + 1;
}

inline const char* type_name(dnnl::memory::data_type t) {
    using dt = dnnl::memory::data_type;
    switch (t) {
        case dt::u8: return "uint8";
        case dt::s8: return "int8";
        case dt::bf16: return "bfloat16";
        case dt::f32: return "float32";
        case dt::s32: return "int32";
        default: return "no type";
    }
}

// A layer's activation types: uint8 in (an int8 layer) with a uint8, bfloat16 or float32 out, or
// one float type throughout.
inline void check_types(dnnl::memory::data_type src, dnnl::memory::data_type dst) {
    using dt = dnnl::memory::data_type;
    auto activation = [](dt t) { return t == dt::u8 || t == dt::bf16 || t == dt::f32; };
    if (!activation(src)) invalid(std::string("src is ") + type_name(src) + "; it must be uint8, bfloat16 or float32");
    if (!activation(dst)) invalid(std::string("dst is ") + type_name(dst) + "; it must be uint8, bfloat16 or float32");
    if (src != dt::u8 && dst != src)
        invalid(std::string("a ") + type_name(src) + " layer's output must be " + type_name(src) + " too, not " +
                type_name(dst));
}

// An int8 layer's activation quantization: positive finite scales, zero points within uint8.
inline void check_quantization(float x_scale, int32_t x_zero_point, bool u8_output, float y_scale,
                               int32_t y_zero_point) {
    auto scale_ok = [](float s) { return s > 0.f && std::isfinite(s); };
    auto code_ok = [](int32_t z) { return z >= 0 && z <= 255; };
    if (!scale_ok(x_scale)) invalid("x_scale is " + std::to_string(x_scale) + "; it must be positive and finite");
    if (!code_ok(x_zero_point)) invalid("x_zero_point " + std::to_string(x_zero_point) + " is outside uint8's range");
    if (!u8_output) return;
    if (!scale_ok(y_scale)) invalid("y_scale is " + std::to_string(y_scale) + "; it must be positive and finite");
    if (!code_ok(y_zero_point)) invalid("y_zero_point " + std::to_string(y_zero_point) + " is outside uint8's range");
}

}  // namespace ipxc_dnnl
