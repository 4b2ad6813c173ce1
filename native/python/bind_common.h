// What every kernel binding (native/kernels/<folder>/bind.cpp) shares: tensor checks, argument
// helpers and the call into a kernel with the GIL released. Compiled into the generic-level module only.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ipxc/dispatch.h"
#include "ipxc/isa.h"
#include "ipxc/kernels.h"
#include "tensor_arg.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace ipxc {

using OptStr = std::optional<std::string>;

[[noreturn]] inline void fail(const std::string& message) { throw std::invalid_argument(message); }

inline void check_cpu_contiguous(const TensorArg& t) {
    if (!t.on_cpu()) fail(std::string(t.name()) + " is not on the CPU; move it with .cpu() first");
    if (!t.is_contiguous())
        fail(std::string(t.name()) + " " + t.shape_str() + " is not contiguous; call .contiguous() first");
}

// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte: an epilogue operand a kernel reads row by row as it
// writes out's rows must not be overwritten first.
inline bool overlaps(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
    const char *a0 = static_cast<const char*>(a), *b0 = static_cast<const char*>(b);
    return a_bytes > 0 && b_bytes > 0 && a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

// The activation dtype: float32 or bfloat16.
inline DType activation_dtype(const TensorArg& t) {
    check_cpu_contiguous(t);
    if (t.is_f32()) return DType::f32;
    if (t.is_bf16()) return DType::bf16;
    fail(std::string(t.name()) + " has dtype " + t.dtype_str() + "; native kernels take float32 or bfloat16");
}

// A tensor that must match `ref` in dtype and element count (its shape is the caller's business).
inline void check_same_dtype(const TensorArg& t, const TensorArg& ref) {
    if (!(t.dtype() == ref.dtype()))
        fail(std::string(t.name()) + " has dtype " + t.dtype_str() + " but " + ref.name() + " has " + ref.dtype_str());
}

inline void check_like(const TensorArg& t, const TensorArg& ref) {
    check_cpu_contiguous(t);
    check_same_dtype(t, ref);
    if (t.size() != ref.size())
        fail(std::string(t.name()) + " " + t.shape_str() + " does not have as many elements as " + ref.name() + " " +
             ref.shape_str());
}

// The dtype of an additive mask (softmax, attention): a float32 or bfloat16 CPU tensor.
inline DType additive_mask_dtype(const TensorArg& m) {
    if (!m.on_cpu()) fail("mask is not on the CPU; move it with .cpu() first");
    if (m.is_f32()) return DType::f32;
    if (m.is_bf16()) return DType::bf16;
    fail("mask has dtype " + m.dtype_str() + "; an additive mask must be float32 or bfloat16");
}

// An additive attention mask broadcastable to [batch, heads, q_len, kv_len] (stride 0 for a broadcast dim,
// last dim full and contiguous): fills its dtype, the strides of its first three dims, and returns its data.
inline const void* additive_mask(const TensorArg& m, const int64_t (&want)[4], DType* dtype, int64_t (&strides)[3]) {
    *dtype = additive_mask_dtype(m);
    if (m.ndim() != 4) fail("mask " + m.shape_str() + " must be 4-D, broadcastable to [batch, heads, q, k]");
    for (int d = 0; d < 4; ++d)
        if (m.shape(d) != want[d] && (d == 3 || m.shape(d) != 1))
            fail("mask " + m.shape_str() + " does not broadcast to [batch, heads, q, k] = [" + std::to_string(want[0]) +
                 ", " + std::to_string(want[1]) + ", " + std::to_string(want[2]) + ", " + std::to_string(want[3]) +
                 "] with a full last dim");
    if (want[3] > 1 && m.stride(3) != 1) fail("mask " + m.shape_str() + " needs a contiguous last dim");
    for (int d = 0; d < 3; ++d) {
        if (m.stride(d) < 0) fail("mask has a negative stride");
        strides[d] = m.shape(d) == 1 ? 0 : m.stride(d);
    }
    return m.data();
}

// A linear layer's input x [..., k] of a decode GEMV (bf16_gemv, f32_gemv): contiguous, or 2-D with contiguous rows
// of any stride at least k apart; at most max_rows rows. Returns {rows, stride between rows}.
inline std::pair<int64_t, int64_t> linear_input_rows(const TensorArg& x, int64_t k, int64_t max_rows,
                                                     const char* kernel) {
    if (x.shape(x.ndim() - 1) != k) fail("x " + x.shape_str() + " must have k = " + std::to_string(k) + " columns");
    const int64_t m = k > 0 ? x.size() / k : 0;
    if (m > max_rows)
        fail("x has " + std::to_string(m) + " rows; " + kernel + " takes at most " + std::to_string(max_rows));
    int64_t stride = k;
    if (!x.is_contiguous()) {  // rows of a 2-D tensor: each row contiguous, rows apart by at least k
        if (x.ndim() != 2 || (x.stride(1) != 1 && k > 1) || (m > 1 && x.stride(0) < k))
            fail("x " + x.shape_str() + " must be contiguous or 2-D with contiguous rows");
        if (m > 1) stride = x.stride(0);
    }
    return {m, stride};
}

// A float32 vector of n elements, one per element of x's last dim (norm weight/bias, ...).
inline const float* f32_vector(const TensorArg& t, int64_t n) {
    check_cpu_contiguous(t);
    if (!t.is_f32()) fail(std::string(t.name()) + " has dtype " + t.dtype_str() + "; it must be float32");
    if (t.size() != n)
        fail(std::string(t.name()) + " " + t.shape_str() + " must have " + std::to_string(n) +
             " elements (the last dim of x)");
    return static_cast<const float*>(t.data());
}

inline const float* f32_vector(const std::optional<TensorArg>& t, int64_t n) { return t ? f32_vector(*t, n) : nullptr; }

// The operands of out = x @ w^T + bias in the plain-weight GEMV bindings (bf16_gemv, bf16_gemm, f32_gemv), checked
// against each other before a kernel reads them: x, w and out CPU tensors of 2 or more dims and of one dtype
// (bfloat16 where bf16, else float32); w [n, k] and out contiguous, out holding x's rows of n; x as
// linear_input_rows takes it (at most max_rows rows); bias float32 [n] or None.
struct LinearOperands {
    int64_t m, x_stride, n, k;
    const float* bias;
};

inline LinearOperands linear_operands(const TensorArg& x, const TensorArg& w, const TensorArg& out,
                                      const std::optional<TensorArg>& bias, bool bf16, int64_t max_rows,
                                      const char* kernel) {
    if (!x.on_cpu() || !w.on_cpu() || !out.on_cpu() || (bias && !bias->on_cpu()))
        fail("x, w, bias and out must be CPU tensors");
    for (const TensorArg* t : {&x, &w, &out})
        if ((bf16 ? !t->is_bf16() : !t->is_f32()) || t->ndim() < 2)
            fail(std::string(t->name()) + " must be a " + (bf16 ? "bfloat16" : "float32") +
                 " tensor of 2 or more dims, got " + t->dtype_str() + " " + t->shape_str());
    check_cpu_contiguous(w);
    check_cpu_contiguous(out);
    if (w.ndim() != 2) fail("w " + w.shape_str() + " must be [n, k]");
    LinearOperands o{0, 0, w.shape(0), w.shape(1), nullptr};
    std::tie(o.m, o.x_stride) = linear_input_rows(x, o.k, max_rows, kernel);
    if (out.shape(out.ndim() - 1) != o.n || out.size() != o.m * o.n)
        fail("out " + out.shape_str() + " must hold " + std::to_string(o.m) + " rows of " + std::to_string(o.n));
    o.bias = f32_vector(bias, o.n);
    return o;
}

// rows x cols with cols = the last dim.
inline void rows_cols(const TensorArg& x, int64_t* rows, int64_t* cols) {
    if (x.ndim() == 0) fail(std::string(x.name()) + " must have at least one dim");
    *cols = x.shape(x.ndim() - 1);
    *rows = *cols == 0 ? 0 : x.size() / *cols;
}

inline Level select(const OptStr& max_isa) { return select_level(max_isa ? max_isa->c_str() : nullptr); }

// ---- calling a kernel, or recording the call (capture.cpp) -----------------------------------------

// While capture() runs on this thread, the calls it records (else null). A recorded call is the kernel's function
// and its argument struct, copied: raw pointers into tensors the capturing caller keeps alive and unchanged.
struct Capture {
    std::vector<std::function<void()>> calls;
    const char* refused = nullptr;  // the first kernel asked for that cannot be recorded
};
Capture*& active_capture();

// The kernel called with the GIL released (no capture on this thread).
template <class Fn, class Args>
inline void call_released(Fn fn, const char* name, const Args& args) {
    if (fn == nullptr) throw std::runtime_error(std::string("native kernel ") + name + " was not built");
    nb::gil_scoped_release release;
    fn(args);
}

// A kernel whose argument struct points only into the tensors it was given: under a capture its call is recorded
// (every check above it has run) and not made.
template <class Fn, class Args>
inline void run_capturable(Fn fn, const char* name, const Args& args) {
    Capture* capture = active_capture();
    if (capture == nullptr) return call_released(fn, name, args);
    if (fn == nullptr) throw std::runtime_error(std::string("native kernel ") + name + " was not built");
    capture->calls.push_back([fn, args] { fn(args); });
}

// A kernel whose argument struct also depends on a length read at run time (a decode step's cache length, from a
// length cell the caller rewrites between runs): under a capture `patch` runs before each recorded call, reading
// the cell and checking that the struct still points within the tensors it was given (it throws where not).
template <class Fn, class Args, class Patch>
inline void run_capturable_patched(Fn fn, const char* name, const Args& args, Patch patch) {
    Capture* capture = active_capture();
    if (capture == nullptr) return call_released(fn, name, args);
    if (fn == nullptr) throw std::runtime_error(std::string("native kernel ") + name + " was not built");
    capture->calls.push_back([fn, args, patch] {
        Args patched = args;
        patch(patched);
        fn(patched);
    });
}

// A length cell: a 1-element int64 CPU tensor whose value a recorded call reads when it runs (the tensor must stay
// alive while the recording is used).
inline const int64_t* length_cell(nb::handle obj) {
    const TensorArg t(obj, "length_at");
    if (!t.on_cpu() || t.dtype() != nb::dtype<int64_t>() || t.size() != 1)
        fail("length_at must be a 1-element int64 CPU tensor, got " + t.dtype_str() + " " + t.shape_str());
    return static_cast<const int64_t*>(t.data());
}

// The cell's length when a recorded call runs, checked against the room its buffers have: `adding` positions from
// it must end within `capacity` (std::out_of_range, which Python sees as IndexError, before anything is written).
inline int64_t length_that_fits(const int64_t* cell, int64_t adding, int64_t capacity, const char* name) {
    const int64_t at = *cell;
    if (at < 0 || at > capacity - adding)
        throw std::out_of_range(std::string(name) + ": positions [" + std::to_string(at) + ", +" + std::to_string(adding) +
                                ") do not fit a cache of " + std::to_string(capacity) + " positions");
    return at;
}

// Any other kernel (its arguments may point at memory of the binding's own): never recorded; under a capture it
// marks the capture refused and makes no call.
template <class Fn, class Args>
inline void run(Fn fn, const char* name, const Args& args) {
    Capture* capture = active_capture();
    if (capture == nullptr) return call_released(fn, name, args);
    if (capture->refused == nullptr) capture->refused = name;
}

inline std::vector<std::string> names_of(const std::vector<Level>& levels) {
    std::vector<std::string> out;
    for (Level l : levels) out.push_back(level_name(l));
    return out;
}

// ---- INT8 ----------------------------------------------------------------------------------------

inline bool is(const TensorArg& t, nb::dlpack::dtype d) { return t.dtype() == d; }

// A KV cache's dtype: float32, bfloat16, or int8 rows of codes and a float32 scale (DType::s8_rows).
inline DType cache_rows_dtype(const TensorArg& t) {
    if (is(t, nb::dtype<int8_t>())) return DType::s8_rows;
    if (t.is_f32()) return DType::f32;
    if (t.is_bf16()) return DType::bf16;
    fail(std::string(t.name()) + " has dtype " + t.dtype_str() + "; a KV cache is float32, bfloat16 or int8 rows");
}

// int8 -> false, uint8 -> true.
inline bool quantized_unsigned(const TensorArg& t) {
    check_cpu_contiguous(t);
    if (is(t, nb::dtype<int8_t>())) return false;
    if (is(t, nb::dtype<uint8_t>())) return true;
    fail(std::string(t.name()) + " has dtype " + t.dtype_str() + "; quantized values are int8 or uint8");
}

// Scales (float32) and zero points (int32) for [rows, cols]: one each, or one per row.
inline void check_qparams(const TensorArg& scales, const TensorArg& zps, bool per_channel, int64_t rows, bool is_unsigned) {
    check_cpu_contiguous(scales);
    check_cpu_contiguous(zps);
    if (!scales.is_f32()) fail("scales has dtype " + scales.dtype_str() + "; it must be float32");
    if (!is(zps, nb::dtype<int32_t>())) fail("zero_points has dtype " + zps.dtype_str() + "; it must be int32");
    const int64_t n = per_channel ? rows : 1;
    if (scales.size() != n || zps.size() != n)
        fail("scales " + scales.shape_str() + " and zero_points " + zps.shape_str() + " must have " + std::to_string(n) +
             (per_channel ? " elements (one per channel: the size of axis 0)" : " element"));
    const int32_t lo = is_unsigned ? 0 : -128, hi = is_unsigned ? 255 : 127;
    const int32_t* z = static_cast<const int32_t*>(zps.data());
    for (int64_t i = 0; i < n; ++i)
        if (z[i] < lo || z[i] > hi)
            fail("zero point " + std::to_string(z[i]) + " is outside the quantized range [" + std::to_string(lo) + ", " +
                 std::to_string(hi) + "]");
}

// Per tensor: one row of all elements; per channel: axis 0 by the rest.
inline void channel_rows_cols(const TensorArg& x, bool per_channel, int64_t* rows, int64_t* cols) {
    if (!per_channel) {
        *rows = 1;
        *cols = x.size();
        return;
    }
    if (x.ndim() == 0) fail(std::string(x.name()) + " needs at least one dim for per-channel quantization");
    *rows = x.shape(0);
    *cols = *rows == 0 ? 0 : x.size() / *rows;
}

}  // namespace ipxc
