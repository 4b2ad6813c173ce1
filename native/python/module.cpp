// ipexconvert._native: Python bindings (nanobind). Compiled for the generic level.
//
// Tensors arrive through DLPack (tensor_arg.h), so the module has no torch dependency at build
// time and one build serves any torch version. Outputs are allocated by the caller and passed
// in. The GIL is released while a kernel runs.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ipxc/dispatch.h"
#include "ipxc/isa.h"
#include "ipxc/kernels.h"
#include "tensor_arg.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace ipxc {
namespace {

using OptStr = std::optional<std::string>;

[[noreturn]] void fail(const std::string& message) { throw std::invalid_argument(message); }

void check_cpu_contiguous(const TensorArg& t) {
    if (!t.on_cpu()) fail(std::string(t.name()) + " is not on the CPU; move it with .cpu() first");
    if (!t.is_contiguous())
        fail(std::string(t.name()) + " " + t.shape_str() + " is not contiguous; call .contiguous() first");
}

// The activation dtype: float32 or bfloat16.
DType activation_dtype(const TensorArg& t) {
    check_cpu_contiguous(t);
    if (t.is_f32()) return DType::f32;
    if (t.is_bf16()) return DType::bf16;
    fail(std::string(t.name()) + " has dtype " + t.dtype_str() + "; native kernels take float32 or bfloat16");
}

// A tensor that must match `ref` in dtype and element count (its shape is the caller's business).
void check_same_dtype(const TensorArg& t, const TensorArg& ref) {
    if (!(t.dtype() == ref.dtype()))
        fail(std::string(t.name()) + " has dtype " + t.dtype_str() + " but " + ref.name() + " has " + ref.dtype_str());
}

void check_like(const TensorArg& t, const TensorArg& ref) {
    check_cpu_contiguous(t);
    check_same_dtype(t, ref);
    if (t.size() != ref.size())
        fail(std::string(t.name()) + " " + t.shape_str() + " does not have as many elements as " + ref.name() + " " +
             ref.shape_str());
}

// The dtype of an additive mask (softmax, attention): a float32 or bfloat16 CPU tensor.
DType additive_mask_dtype(const TensorArg& m) {
    if (!m.on_cpu()) fail("mask is not on the CPU; move it with .cpu() first");
    if (m.is_f32()) return DType::f32;
    if (m.is_bf16()) return DType::bf16;
    fail("mask has dtype " + m.dtype_str() + "; an additive mask must be float32 or bfloat16");
}

// A float32 vector of n elements, one per element of x's last dim (norm weight/bias, ...).
const float* f32_vector(const TensorArg& t, int64_t n) {
    check_cpu_contiguous(t);
    if (!t.is_f32()) fail(std::string(t.name()) + " has dtype " + t.dtype_str() + "; it must be float32");
    if (t.size() != n)
        fail(std::string(t.name()) + " " + t.shape_str() + " must have " + std::to_string(n) +
             " elements (the last dim of x)");
    return static_cast<const float*>(t.data());
}
const float* f32_vector(const std::optional<TensorArg>& t, int64_t n) { return t ? f32_vector(*t, n) : nullptr; }

// rows x cols with cols = the last dim.
void rows_cols(const TensorArg& x, int64_t* rows, int64_t* cols) {
    if (x.ndim() == 0) fail(std::string(x.name()) + " must have at least one dim");
    *cols = x.shape(x.ndim() - 1);
    *rows = *cols == 0 ? 0 : x.size() / *cols;
}

Level select(const OptStr& max_isa) { return select_level(max_isa ? max_isa->c_str() : nullptr); }

template <class Fn, class Args>
void run(Fn fn, const char* name, const Args& args) {
    if (fn == nullptr) throw std::runtime_error(std::string("native kernel ") + name + " was not built");
    nb::gil_scoped_release release;
    fn(args);
}

std::vector<std::string> names_of(const std::vector<Level>& levels) {
    std::vector<std::string> out;
    for (Level l : levels) out.push_back(level_name(l));
    return out;
}

// ---- kernels -------------------------------------------------------------------------------------

bool quantized_unsigned(const TensorArg& t);  // INT8 section below
bool is(const TensorArg& t, nb::dlpack::dtype d);

void norm(bool rms, nb::handle x_obj, nb::handle residual_obj, nb::handle weight_obj, nb::handle bias_obj, double eps,
          nb::handle out_obj, nb::handle sum_obj, const OptStr& max_isa, int threads, nb::handle q_obj = nb::none(),
          double q_scale = 1.0, int q_zero_point = 0, nb::handle q_multipliers_obj = nb::none()) {
    const TensorArg x(x_obj, "x"), out(out_obj, "out");
    const auto residual = optional_tensor(residual_obj, "residual");
    const auto sum = optional_tensor(sum_obj, "sum_out");
    const auto weight = optional_tensor(weight_obj, "weight");
    const auto bias = optional_tensor(bias_obj, "bias");
    NormArgs a;
    a.dtype = activation_dtype(x);
    rows_cols(x, &a.rows, &a.cols);
    check_like(out, x);
    if (residual) {
        check_like(*residual, x);
        a.residual = residual->data();
    }
    if (sum) {
        if (!residual) fail("sum_out needs a residual");
        check_like(*sum, x);
        a.sum = sum->data();
    }
    a.gamma = f32_vector(weight, a.cols);
    if (rms && bias) fail("rms_norm has no bias");
    a.beta = f32_vector(bias, a.cols);
    a.x = x.data();
    a.y = out.data();
    a.eps = static_cast<float>(eps);
    a.threads = threads;
    const auto q = optional_tensor(q_obj, "q_out");
    const auto q_multipliers = optional_tensor(q_multipliers_obj, "q_multipliers");
    if (q_multipliers && !q) fail("q_multipliers needs q_out");
    if (q) {
        if (rms) fail("rms_norm has no quantized output");
        a.q_unsigned = quantized_unsigned(*q);
        if (q->size() != x.size()) fail("q_out " + q->shape_str() + " does not have as many elements as x " + x.shape_str());
        if (!(q_scale > 0.0)) fail("q_scale must be positive");
        if (a.q_unsigned ? (q_zero_point < 0 || q_zero_point > 255) : (q_zero_point < -128 || q_zero_point > 127))
            fail("q_zero_point " + std::to_string(q_zero_point) + " is outside q_out's range");
        a.q = q->data();
        a.q_multipliers = f32_vector(q_multipliers, a.cols);
        a.q_scale = static_cast<float>(q_scale);
        a.q_zero_point = q_zero_point;
    }
    if (rms)
        run(lookup_rms_norm(select(max_isa)), "rms_norm", a);
    else
        run(lookup_layer_norm(select(max_isa)), "layer_norm", a);
}

void softmax(nb::handle x_obj, double scale, nb::handle mask_obj, nb::handle out_obj, const OptStr& max_isa,
             int threads) {
    const TensorArg x(x_obj, "x"), out(out_obj, "out");
    const auto mask = optional_tensor(mask_obj, "mask");
    SoftmaxArgs a;
    a.dtype = activation_dtype(x);
    rows_cols(x, &a.rows, &a.cols);
    check_like(out, x);
    if (mask) {
        // The mask has x's rank; a broadcast dim has size 1 (any stride); the last dim is
        // x's and contiguous.
        const TensorArg& m = *mask;
        const int nd = x.ndim();
        a.mask_dtype = additive_mask_dtype(m);
        if (m.ndim() != nd) fail("mask " + m.shape_str() + " must have the rank of x " + x.shape_str());
        if (nd - 1 > kMaxMaskDims) fail("a masked softmax supports at most " + std::to_string(kMaxMaskDims + 1) + " dims");
        for (int d = 0; d < nd; ++d)
            if (m.shape(d) != x.shape(d) && m.shape(d) != 1)
                fail("mask " + m.shape_str() + " does not broadcast to x " + x.shape_str());
        if (m.shape(nd - 1) != a.cols || (a.cols > 1 && m.stride(nd - 1) != 1))
            fail("mask " + m.shape_str() + " needs a contiguous last dim of " + std::to_string(a.cols) + " elements");
        a.lead_ndim = nd - 1;
        for (int d = 0; d < a.lead_ndim; ++d) {
            a.lead_shape[d] = x.shape(d);
            a.mask_strides[d] = m.shape(d) == 1 ? 0 : m.stride(d);
        }
        a.mask = m.data();
    }
    a.x = x.data();
    a.y = out.data();
    a.scale = static_cast<float>(scale);
    a.threads = threads;
    run(lookup_softmax(select(max_isa)), "softmax", a);
}

// q, k, v, out: [batch, heads, seq, head_dim] views with a contiguous last dim, all bf16 (the
// `attention` kernel) or all float32 (`attention_f32`). out may instead be int8/uint8, for the
// output quantized (q_scale, q_zero_point, optional q_multipliers of heads * head_dim
// floats; see AttentionArgs).
void attention(nb::handle q_obj, nb::handle k_obj, nb::handle v_obj, nb::handle mask_obj, nb::handle out_obj,
               double scale, const OptStr& max_isa, int threads, double q_scale, int q_zero_point,
               nb::handle q_multipliers_obj) {
    const TensorArg q(q_obj, "q"), k(k_obj, "k"), v(v_obj, "v"), out(out_obj, "out");
    const auto mask = optional_tensor(mask_obj, "mask");
    const auto q_multipliers = optional_tensor(q_multipliers_obj, "q_multipliers");
    const bool f32 = q.is_f32();
    AttentionArgs a;
    a.quantized = is(out, nb::dtype<int8_t>()) || is(out, nb::dtype<uint8_t>());
    for (const TensorArg* t : {&q, &k, &v, &out}) {
        const std::string what = std::string(t->name()) + " " + t->shape_str();
        if (!t->on_cpu()) fail(what + " is not on the CPU; move it with .cpu() first");
        if (t == &out && !a.quantized && (f32 ? !out.is_f32() : !out.is_bf16())) {
            fail("out has dtype " + out.dtype_str() + "; attention writes q's dtype, or int8/uint8 codes");
        } else if (t != &out && (f32 ? !t->is_f32() : !t->is_bf16())) {
            fail(std::string(t->name()) + " has dtype " + t->dtype_str() +
                 "; attention takes bfloat16 or float32 q, k and v, all of one dtype");
        }
        if (t->ndim() != 4) fail(what + " must be 4-D: [batch, heads, seq, head_dim]");
        if (t->stride(3) != 1) fail(what + " needs a contiguous last dim");
    }
    a.batch = q.shape(0), a.heads = q.shape(1), a.q_len = q.shape(2), a.head_dim = q.shape(3), a.kv_len = k.shape(2);
    const int64_t head_multiple = f32 ? 16 : 32;  // one fp32 vector; one bf16 tile row
    if (a.head_dim <= 0 || a.head_dim % head_multiple != 0)
        fail("head_dim " + std::to_string(a.head_dim) + " is not a multiple of " + std::to_string(head_multiple) +
             (f32 ? " (one vector of float32)" : " (what the tiles take)"));
    if (a.kv_len <= 0) fail("k " + k.shape_str() + " has no keys");
    for (const TensorArg* t : {&k, &v})
        if (t->shape(0) != a.batch || t->shape(1) != a.heads || t->shape(2) != a.kv_len || t->shape(3) != a.head_dim)
            fail(std::string(t->name()) + " " + t->shape_str() + " does not match q " + q.shape_str() + " and k " +
                 k.shape_str());
    for (int d = 0; d < 4; ++d)
        if (out.shape(d) != q.shape(d)) fail("out " + out.shape_str() + " must have q's shape " + q.shape_str());
    for (int d = 0; d < 3; ++d) {
        a.q_strides[d] = q.stride(d), a.k_strides[d] = k.stride(d), a.v_strides[d] = v.stride(d);
        a.out_strides[d] = out.stride(d);
    }
    if (mask) {
        const TensorArg& m = *mask;
        a.mask_dtype = additive_mask_dtype(m);
        const int64_t want[4] = {a.batch, a.heads, a.q_len, a.kv_len};
        if (m.ndim() != 4) fail("mask " + m.shape_str() + " must be 4-D, broadcastable to [batch, heads, q, k]");
        for (int d = 0; d < 4; ++d)
            if (m.shape(d) != want[d] && (d == 3 || m.shape(d) != 1))
                fail("mask " + m.shape_str() + " does not broadcast to [batch, heads, q, k] = [" +
                     std::to_string(a.batch) + ", " + std::to_string(a.heads) + ", " + std::to_string(a.q_len) + ", " +
                     std::to_string(a.kv_len) + "] with a full last dim");
        if (a.kv_len > 1 && m.stride(3) != 1) fail("mask " + m.shape_str() + " needs a contiguous last dim");
        for (int d = 0; d < 3; ++d) a.mask_strides[d] = m.shape(d) == 1 ? 0 : m.stride(d);
        a.mask = m.data();
    }
    if (q_multipliers && !a.quantized) fail("q_multipliers needs an int8 or uint8 out");
    if (a.quantized) {
        a.q_unsigned = is(out, nb::dtype<uint8_t>());
        if (!(q_scale > 0.0)) fail("q_scale must be positive");
        if (a.q_unsigned ? (q_zero_point < 0 || q_zero_point > 255) : (q_zero_point < -128 || q_zero_point > 127))
            fail("q_zero_point " + std::to_string(q_zero_point) + " is outside out's range");
        if (q_multipliers) {
            check_cpu_contiguous(*q_multipliers);
            if (!q_multipliers->is_f32() || q_multipliers->size() != a.heads * a.head_dim)
                fail("q_multipliers " + q_multipliers->shape_str() + " (" + q_multipliers->dtype_str() +
                     ") must be float32 with heads * head_dim = " + std::to_string(a.heads * a.head_dim) + " elements");
            a.q_multipliers = static_cast<const float*>(q_multipliers->data());
        }
        a.q_scale = static_cast<float>(q_scale);
        a.q_zero_point = q_zero_point;
    }
    a.q = q.data(), a.k = k.data(), a.v = v.data(), a.out = out.data();
    a.scale = static_cast<float>(scale);
    a.threads = threads;
    if (f32)
        run(lookup_attention_f32(select(max_isa)), "attention_f32", a);
    else
        run(lookup_attention(select(max_isa)), "attention", a);
}

void gelu(nb::handle x_obj, bool tanh, nb::handle out_obj, const OptStr& max_isa, int threads) {
    const TensorArg x(x_obj, "x"), out(out_obj, "out");
    GeluArgs a;
    a.dtype = activation_dtype(x);
    check_like(out, x);
    a.x = x.data();
    a.y = out.data();
    a.n = x.size();
    a.tanh = tanh;
    a.threads = threads;
    run(lookup_gelu(select(max_isa)), "gelu", a);
}

void silu(nb::handle x_obj, nb::handle out_obj, const OptStr& max_isa, int threads) {
    const TensorArg x(x_obj, "x"), out(out_obj, "out");
    UnaryArgs a;
    a.dtype = activation_dtype(x);
    check_like(out, x);
    a.x = x.data();
    a.y = out.data();
    a.n = x.size();
    a.threads = threads;
    run(lookup_silu(select(max_isa)), "silu", a);
}

void silu_mul(nb::handle a_obj, nb::handle b_obj, nb::handle out_obj, const OptStr& max_isa, int threads) {
    const TensorArg x(a_obj, "a"), gate(b_obj, "b"), out(out_obj, "out");
    BinaryArgs a;
    a.dtype = activation_dtype(x);
    check_like(gate, x);
    check_like(out, x);
    a.a = x.data();
    a.b = gate.data();
    a.y = out.data();
    a.n = x.size();
    a.threads = threads;
    run(lookup_silu_mul(select(max_isa)), "silu_mul", a);
}

// ---- INT8 ----------------------------------------------------------------------------------------

bool is(const TensorArg& t, nb::dlpack::dtype d) { return t.dtype() == d; }

// int8 -> false, uint8 -> true.
bool quantized_unsigned(const TensorArg& t) {
    check_cpu_contiguous(t);
    if (is(t, nb::dtype<int8_t>())) return false;
    if (is(t, nb::dtype<uint8_t>())) return true;
    fail(std::string(t.name()) + " has dtype " + t.dtype_str() + "; quantized values are int8 or uint8");
}

// Scales (float32) and zero points (int32) for [rows, cols]: one each, or one per row.
void check_qparams(const TensorArg& scales, const TensorArg& zps, bool per_channel, int64_t rows, bool is_unsigned) {
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
void channel_rows_cols(const TensorArg& x, bool per_channel, int64_t* rows, int64_t* cols) {
    if (!per_channel) {
        *rows = 1;
        *cols = x.size();
        return;
    }
    if (x.ndim() == 0) fail(std::string(x.name()) + " needs at least one dim for per-channel quantization");
    *rows = x.shape(0);
    *cols = *rows == 0 ? 0 : x.size() / *rows;
}

void quantize(nb::handle x_obj, nb::handle scales_obj, nb::handle zps_obj, bool per_channel, nb::handle out_obj,
              const OptStr& max_isa, int threads) {
    const TensorArg x(x_obj, "x"), scales(scales_obj, "scales"), zps(zps_obj, "zero_points"), out(out_obj, "out");
    QuantizeArgs a;
    a.dtype = activation_dtype(x);
    a.out_unsigned = quantized_unsigned(out);
    if (out.size() != x.size()) fail("out " + out.shape_str() + " does not have as many elements as x " + x.shape_str());
    channel_rows_cols(x, per_channel, &a.rows, &a.cols);
    check_qparams(scales, zps, per_channel, a.rows, a.out_unsigned);
    a.x = x.data();
    a.y = out.data();
    a.scales = static_cast<const float*>(scales.data());
    a.zero_points = static_cast<const int32_t*>(zps.data());
    a.per_channel = per_channel;
    a.threads = threads;
    run(lookup_quantize(select(max_isa)), "quantize", a);
}

// x [N, C, H, W] (contiguous) into out [N, H, W, C] (contiguous, i.e. the NHWC view of a
// channels-last tensor): float32/bf16 out converts, int8/uint8 out quantizes per tensor.
void to_channels_last(nb::handle x_obj, nb::handle out_obj, float scale, int zero_point, const OptStr& max_isa,
                      int threads) {
    const TensorArg x(x_obj, "x"), out(out_obj, "out");
    ChannelsLastArgs a;
    a.dtype = activation_dtype(x);
    check_cpu_contiguous(out);
    if (x.ndim() != 4) fail("x " + x.shape_str() + " must be 4-D [N, C, H, W]");
    if (out.ndim() != 4 || out.shape(0) != x.shape(0) || out.shape(1) != x.shape(2) || out.shape(2) != x.shape(3) ||
        out.shape(3) != x.shape(1))
        fail("out " + out.shape_str() + " must be x " + x.shape_str() + " as [N, H, W, C]");
    a.quantized = is(out, nb::dtype<int8_t>()) || is(out, nb::dtype<uint8_t>());
    if (a.quantized) {
        a.out_unsigned = quantized_unsigned(out);
        if (!(scale > 0.0f) || scale == std::numeric_limits<float>::infinity())
            fail("scale must be positive and finite, got " + std::to_string(scale));
        const int lo = a.out_unsigned ? 0 : -128, hi = a.out_unsigned ? 255 : 127;
        if (zero_point < lo || zero_point > hi)
            fail("zero point " + std::to_string(zero_point) + " is outside the quantized range [" + std::to_string(lo) +
                 ", " + std::to_string(hi) + "]");
    } else {
        a.out_dtype = activation_dtype(out);
    }
    a.x = x.data();
    a.y = out.data();
    a.batch = x.shape(0);
    a.channels = x.shape(1);
    a.pixels = x.shape(2) * x.shape(3);
    a.scale = scale;
    a.zero_point = zero_point;
    a.threads = threads;
    run(lookup_to_channels_last(select(max_isa)), "to_channels_last", a);
}

// The mean over H and W of x [N, C, H, W] (contiguous; or, with channels_last, its NHWC view
// [N, H, W, C]) into out [N, C] of x's dtype.
void spatial_mean(nb::handle x_obj, bool channels_last, nb::handle out_obj, const OptStr& max_isa, int threads) {
    const TensorArg x(x_obj, "x"), out(out_obj, "out");
    SpatialMeanArgs a;
    a.dtype = activation_dtype(x);
    check_cpu_contiguous(out);
    check_same_dtype(out, x);
    if (x.ndim() != 4) fail("x " + x.shape_str() + " must be 4-D");
    a.batch = x.shape(0);
    a.channels = channels_last ? x.shape(3) : x.shape(1);
    a.pixels = channels_last ? x.shape(1) * x.shape(2) : x.shape(2) * x.shape(3);
    if (a.pixels == 0) fail("x " + x.shape_str() + " has no pixels to average");
    if (out.ndim() != 2 || out.shape(0) != a.batch || out.shape(1) != a.channels)
        fail("out " + out.shape_str() + " must be [" + std::to_string(a.batch) + ", " + std::to_string(a.channels) + "]");
    a.channels_last = channels_last;
    a.x = x.data();
    a.y = out.data();
    a.threads = threads;
    run(lookup_spatial_mean(select(max_isa)), "spatial_mean", a);
}

// out = cat([a, b], dim=1) for 4-D a, b with contiguous channels (other strides free), out
// channels-last [N, Ca + Cb, H, W] of their dtype.
void concat_channels(nb::handle a_obj, nb::handle b_obj, nb::handle out_obj, const OptStr& max_isa, int threads) {
    const TensorArg a(a_obj, "a"), b(b_obj, "b"), out(out_obj, "out");
    ConcatChannelsArgs args;
    for (const TensorArg* t : {&a, &b, &out})
        if (!t->on_cpu() || t->ndim() != 4) fail(std::string(t->name()) + " " + t->shape_str() + " must be a 4-D CPU tensor");
    check_same_dtype(b, a);
    check_same_dtype(out, a);
    args.batch = a.shape(0), args.height = a.shape(2), args.width = a.shape(3);
    if (b.shape(0) != args.batch || b.shape(2) != args.height || b.shape(3) != args.width)
        fail("b " + b.shape_str() + " must match a " + a.shape_str() + " in every dim but the channels");
    if (out.shape(0) != args.batch || out.shape(1) != a.shape(1) + b.shape(1) || out.shape(2) != args.height ||
        out.shape(3) != args.width)
        fail("out " + out.shape_str() + " must be [N, Ca + Cb, H, W] for a " + a.shape_str() + " and b " + b.shape_str());
    const int64_t c = out.shape(1), h = args.height, w = args.width;
    if (out.stride(1) != 1 || out.stride(3) != c || out.stride(2) != w * c || out.stride(0) != h * w * c)
        fail("out " + out.shape_str() + " must be dense channels-last (torch.channels_last)");
    const TensorArg* inputs[2] = {&a, &b};
    for (int i = 0; i < 2; ++i) {
        const TensorArg& t = *inputs[i];
        if (t.shape(1) > 1 && t.stride(1) != 1)
            fail(std::string(t.name()) + " " + t.shape_str() + " needs contiguous channels (stride 1 along dim 1)");
        args.src[i] = t.data();
        args.channels[i] = t.shape(1);
        args.strides[i][0] = t.stride(0), args.strides[i][1] = t.stride(2), args.strides[i][2] = t.stride(3);
    }
    args.out = out.data();
    args.itemsize = (out.dtype().bits * out.dtype().lanes + 7) / 8;
    args.threads = threads;
    run(lookup_concat_channels(select(max_isa)), "concat_channels", args);
}

void dequantize(nb::handle q_obj, nb::handle scales_obj, nb::handle zps_obj, bool per_channel, nb::handle out_obj,
                const OptStr& max_isa, int threads) {
    const TensorArg q(q_obj, "q"), scales(scales_obj, "scales"), zps(zps_obj, "zero_points"), out(out_obj, "out");
    DequantizeArgs a;
    a.in_unsigned = quantized_unsigned(q);
    a.dtype = activation_dtype(out);
    if (out.size() != q.size()) fail("out " + out.shape_str() + " does not have as many elements as q " + q.shape_str());
    channel_rows_cols(q, per_channel, &a.rows, &a.cols);
    check_qparams(scales, zps, per_channel, a.rows, a.in_unsigned);
    a.q = q.data();
    a.y = out.data();
    a.scales = static_cast<const float*>(scales.data());
    a.zero_points = static_cast<const int32_t*>(zps.data());
    a.per_channel = per_channel;
    a.threads = threads;
    run(lookup_dequantize(select(max_isa)), "dequantize", a);
}

void requantize(nb::handle acc_obj, nb::handle mult_obj, nb::handle bias_obj, int zero_point, nb::handle out_obj,
                const OptStr& max_isa, int threads) {
    const TensorArg acc(acc_obj, "acc"), mult(mult_obj, "multipliers"), out(out_obj, "out");
    const auto bias = optional_tensor(bias_obj, "bias");
    RequantizeArgs a;
    check_cpu_contiguous(acc);
    if (!is(acc, nb::dtype<int32_t>())) fail("acc has dtype " + acc.dtype_str() + "; it must be int32");
    rows_cols(acc, &a.rows, &a.cols);
    a.out_unsigned = quantized_unsigned(out);
    if (out.size() != acc.size()) fail("out " + out.shape_str() + " does not have as many elements as acc " + acc.shape_str());
    check_cpu_contiguous(mult);
    if (!mult.is_f32()) fail("multipliers has dtype " + mult.dtype_str() + "; it must be float32");
    if (mult.size() != a.cols && mult.size() != 1)
        fail("multipliers " + mult.shape_str() + " must have 1 or " + std::to_string(a.cols) +
             " elements (one per output channel: the last dim of acc)");
    a.per_channel = mult.size() != 1 || a.cols == 1;
    if (bias) {
        check_cpu_contiguous(*bias);
        if (!is(*bias, nb::dtype<int32_t>())) fail("bias has dtype " + bias->dtype_str() + "; it must be int32");
        if (bias->size() != a.cols)
            fail("bias " + bias->shape_str() + " must have " + std::to_string(a.cols) + " elements (the last dim of acc)");
        a.bias = static_cast<const int32_t*>(bias->data());
    }
    const int lo = a.out_unsigned ? 0 : -128, hi = a.out_unsigned ? 255 : 127;
    if (zero_point < lo || zero_point > hi)
        fail("zero_point " + std::to_string(zero_point) + " is outside the quantized range [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "]");
    a.acc = static_cast<const int32_t*>(acc.data());
    a.multipliers = static_cast<const float*>(mult.data());
    a.zero_point = zero_point;
    a.y = out.data();
    a.threads = threads;
    run(lookup_requantize(select(max_isa)), "requantize", a);
}

// Per-channel multipliers along the last axis (SmoothQuant activations): x [..., C], inv_scales [C].
void quantize_last_axis(nb::handle x_obj, nb::handle inv_obj, int zero_point, nb::handle out_obj, const OptStr& max_isa,
                        int threads) {
    const TensorArg x(x_obj, "x"), inv(inv_obj, "inv_scales"), out(out_obj, "out");
    QuantizeLastAxisArgs a;
    a.dtype = activation_dtype(x);
    rows_cols(x, &a.rows, &a.cols);
    a.out_unsigned = quantized_unsigned(out);
    if (out.size() != x.size()) fail("out " + out.shape_str() + " does not have as many elements as x " + x.shape_str());
    a.inv_scales = f32_vector(inv, a.cols);
    const int lo = a.out_unsigned ? 0 : -128, hi = a.out_unsigned ? 255 : 127;
    if (zero_point < lo || zero_point > hi)
        fail("zero_point " + std::to_string(zero_point) + " is outside the quantized range [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "]");
    a.x = x.data();
    a.y = out.data();
    a.zero_point = zero_point;
    a.threads = threads;
    run(lookup_quantize_last_axis(select(max_isa)), "quantize_last_axis", a);
}

void embedding(nb::handle weight_obj, nb::handle indices_obj, nb::handle out_obj, const OptStr& max_isa, int threads) {
    const TensorArg weight(weight_obj, "weight"), indices(indices_obj, "indices"), out(out_obj, "out");
    EmbeddingArgs a;
    a.dtype = activation_dtype(weight);
    if (weight.ndim() != 2) fail("weight " + weight.shape_str() + " must be 2-D [num_embeddings, embedding_dim]");
    check_cpu_contiguous(indices);
    if (is(indices, nb::dtype<int64_t>())) a.indices_i32 = false;
    else if (is(indices, nb::dtype<int32_t>())) a.indices_i32 = true;
    else fail("indices has dtype " + indices.dtype_str() + "; it must be int64 or int32");
    a.vocab = weight.shape(0);
    a.dim = weight.shape(1);
    a.n = indices.size();
    check_cpu_contiguous(out);
    check_same_dtype(out, weight);
    int64_t rows_size = 0;  // indices.numel() * dim, refused when it wraps (a huge index tensor of a huge dim)
    if (__builtin_mul_overflow(a.n, a.dim, &rows_size) || out.size() != rows_size)
        fail("out " + out.shape_str() + " must have indices.numel() * " + std::to_string(a.dim) + " elements");
    int64_t bad = -1;
    a.weight = weight.data();
    a.indices = indices.data();
    a.y = out.data();
    a.bad_position = &bad;
    a.threads = threads;
    run(lookup_embedding(select(max_isa)), "embedding", a);
    if (bad >= 0) {
        const int64_t v = a.indices_i32 ? static_cast<const int32_t*>(a.indices)[bad] : static_cast<const int64_t*>(a.indices)[bad];
        throw std::out_of_range("embedding index " + std::to_string(v) + " (at flat position " + std::to_string(bad) +
                                ") is out of range for a table of " + std::to_string(a.vocab) + " rows");
    }
}

// The level kernel `name` runs at under max_isa (None: IPEXCONVERT_MAX_ISA, else the best), or
// "none" when it has no build at or below that level (attention has none below avx512_bf16).
std::string kernel_level(const std::string& name, const OptStr& max_isa) {
    bool known = false;
    for (const char* k : kernel_names()) known = known || name == k;
    if (!known) fail("no native kernel named '" + name + "'");
    const std::vector<Level> built = kernel_levels(name.c_str());  // empty: a compiler without its level's flags
    const Level want = select(max_isa);
    std::string used = "none";
    for (Level l : built)
        if (static_cast<int>(l) <= static_cast<int>(want)) used = level_name(l);
    return used;
}

nb::dict cpu_features_dict() {
    const CpuFeatures& f = cpu_features();
    nb::dict d;
    d["avx"] = f.avx; d["avx2"] = f.avx2; d["fma"] = f.fma; d["f16c"] = f.f16c;
    d["avx512f"] = f.avx512f; d["avx512bw"] = f.avx512bw; d["avx512dq"] = f.avx512dq; d["avx512vl"] = f.avx512vl;
    d["avx512_vnni"] = f.avx512_vnni; d["avx512_bf16"] = f.avx512_bf16;
    d["amx_tile"] = f.amx_tile; d["amx_bf16"] = f.amx_bf16; d["amx_int8"] = f.amx_int8;
    d["xcr0"] = f.xcr0; d["os_ymm"] = f.os_ymm; d["os_zmm"] = f.os_zmm; d["os_tiles"] = f.os_tiles;
    d["amx_permission"] = f.amx_permission;
    return d;
}

// int8_gemm: a [m, k] uint8 (rows may be strided, elements contiguous), w packed int16 (see
// kernels.h), out [m, n] float32 / bfloat16 / uint8 / int8 (rows may be strided).
// Convolution geometry for int8_gemm's on-the-fly im2col: a is a dense NHWC uint8 image.
void set_conv_rows(Int8GemmArgs& g, const TensorArg& a, const std::vector<int64_t>& conv) {
    if (conv.size() != 8) fail("conv must be (kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w)");
    for (int i = 0; i < 8; ++i) {
        const bool is_pad = i == 4 || i == 5;
        if (conv[i] < (is_pad ? 0 : 1) || conv[i] > (1 << 20)) fail("conv geometry value " + std::to_string(conv[i]) + " is out of range");
    }
    if (!is(a, nb::dtype<uint8_t>()) || a.ndim() != 4) fail("a must be a 4-D uint8 NHWC image for a convolution, got " + a.dtype_str() + " " + a.shape_str());
    if (!a.is_contiguous()) fail("a " + a.shape_str() + " must be a dense NHWC image (a channels-last tensor's permute(0, 2, 3, 1))");
    g.conv = true;
    g.in_h = a.shape(1);
    g.in_w = a.shape(2);
    g.channels = a.shape(3);
    g.kernel_h = conv[0], g.kernel_w = conv[1], g.stride_h = conv[2], g.stride_w = conv[3];
    g.pad_h = conv[4], g.pad_w = conv[5], g.dilation_h = conv[6], g.dilation_w = conv[7];
    const int64_t span_h = g.dilation_h * (g.kernel_h - 1) + 1, span_w = g.dilation_w * (g.kernel_w - 1) + 1;
    if (g.in_h + 2 * g.pad_h < span_h || g.in_w + 2 * g.pad_w < span_w) fail("the kernel does not fit the padded image");
    g.out_h = (g.in_h + 2 * g.pad_h - span_h) / g.stride_h + 1;
    g.out_w = (g.in_w + 2 * g.pad_w - span_w) / g.stride_w + 1;
    g.m = a.shape(0) * g.out_h * g.out_w;
    g.k = g.kernel_h * g.kernel_w * g.channels;
    g.a_stride = 0;
}

void int8_gemm(nb::handle a_obj, int a_zero_point, nb::handle w_obj, int64_t n, nb::handle scales_obj,
               nb::handle bias_obj, bool relu, nb::handle out_obj, double out_scale, int out_zero_point,
               const OptStr& max_isa, int threads, nb::handle residual_obj, double residual_scale,
               int residual_zero_point, const std::optional<std::vector<int64_t>>& conv) {
    const TensorArg a(a_obj, "a"), w(w_obj, "w"), out(out_obj, "out");
    const auto bias = optional_tensor(bias_obj, "bias");
    const auto residual = optional_tensor(residual_obj, "residual");
    Int8GemmArgs g;
    if (!a.on_cpu() || !out.on_cpu() || !w.on_cpu()) fail("int8_gemm takes CPU tensors");
    if (conv) {
        set_conv_rows(g, a, *conv);
    } else {
        if (!is(a, nb::dtype<uint8_t>()) || a.ndim() != 2) fail("a must be a 2-D uint8 tensor, got " + a.dtype_str() + " " + a.shape_str());
        if (a.stride(1) != 1 || a.stride(0) < a.shape(1)) fail("a " + a.shape_str() + " needs contiguous rows");
        g.m = a.shape(0);
        g.k = a.shape(1);
        g.a_stride = a.stride(0);
    }
    g.n = n;
    if (g.k < 1 || g.k > 65536) fail("k = " + std::to_string(g.k) + " is outside 1..65536 (int32 sums stay exact up to there)");
    if (n < 1 || n > std::numeric_limits<int32_t>::max())  // also keeps the packed size below from overflowing
        fail("n = " + std::to_string(n) + " is outside 1.." + std::to_string(std::numeric_limits<int32_t>::max()));
    if (a_zero_point < 0 || a_zero_point > 255) fail("a_zero_point " + std::to_string(a_zero_point) + " is outside 0..255");
    check_cpu_contiguous(w);
    const int64_t n16 = (n + 15) / 16 * 16, k2 = (g.k + 1) / 2 * 2;
    if (!is(w, nb::dtype<int16_t>()) || w.size() != n16 * k2)
        fail("w must be the packed int16 weight of " + std::to_string(n16 * k2) + " elements (n=" + std::to_string(n) +
             ", k=" + std::to_string(g.k) + "), got " + w.dtype_str() + " " + w.shape_str());
    g.scales = f32_vector(TensorArg(scales_obj, "scales"), n);
    if (bias) g.bias = f32_vector(*bias, n);
    if (out.ndim() != 2 || out.shape(0) != g.m || out.shape(1) != n)
        fail("out " + out.shape_str() + " must be [" + std::to_string(g.m) + ", " + std::to_string(n) + "]");
    if (out.stride(1) != 1 || out.stride(0) < n) fail("out " + out.shape_str() + " needs contiguous rows");
    if (out.is_f32()) g.out = GemmOut::f32;
    else if (out.is_bf16()) g.out = GemmOut::bf16;
    else if (is(out, nb::dtype<uint8_t>())) g.out = GemmOut::u8;
    else if (is(out, nb::dtype<int8_t>())) g.out = GemmOut::s8;
    else fail("out has dtype " + out.dtype_str() + "; it must be float32, bfloat16, uint8 or int8");
    if (g.out == GemmOut::u8 || g.out == GemmOut::s8) {
        if (!(out_scale > 0.0) || !(out_scale < 1e30)) fail("out_scale must be a positive finite number");
        const int lo = g.out == GemmOut::u8 ? 0 : -128, hi = g.out == GemmOut::u8 ? 255 : 127;
        if (out_zero_point < lo || out_zero_point > hi) fail("out_zero_point " + std::to_string(out_zero_point) + " is outside out's range");
        g.out_inv_scale = static_cast<float>(1.0 / out_scale);
        g.out_zero_point = out_zero_point;
    }
    if (residual) {
        if (!residual->on_cpu() || residual->ndim() != 2 || residual->shape(0) != g.m || residual->shape(1) != n)
            fail("residual " + residual->shape_str() + " must be [" + std::to_string(g.m) + ", " + std::to_string(n) + "] on the CPU");
        if (residual->stride(1) != 1 || residual->stride(0) < n) fail("residual " + residual->shape_str() + " needs contiguous rows");
        if (is(*residual, nb::dtype<uint8_t>())) {
            if (!(residual_scale > 0.0) || !(residual_scale < 1e30)) fail("residual_scale must be a positive finite number");
            if (residual_zero_point < 0 || residual_zero_point > 255) fail("residual_zero_point is outside 0..255");
            g.residual_u8 = true;
            g.residual_scale = static_cast<float>(residual_scale);
            g.residual_zero_point = residual_zero_point;
        } else if (!residual->is_f32()) {
            fail("residual has dtype " + residual->dtype_str() + "; it must be uint8 or float32");
        }
        g.residual = residual->data();
        g.residual_stride = residual->stride(0);
    }
    g.a = static_cast<const uint8_t*>(a.data());
    g.a_zero_point = a_zero_point;
    g.w = static_cast<const int16_t*>(w.data());
    g.relu = relu;
    g.y = out.data();
    g.y_stride = out.stride(0);
    g.threads = threads;
    run(lookup_int8_gemm(select(max_isa)), "int8_gemm", g);
}

}  // namespace
}  // namespace ipxc

NB_MODULE(_native, m) {
    using namespace ipxc;
    m.doc() = "ipexconvert native kernels with ISA dispatch; use ipexconvert.native, which wraps these for torch";

    m.def("levels", [] {
        std::vector<std::string> out;
        for (int i = 0; i < kNumLevels; ++i) out.push_back(level_name(static_cast<Level>(i)));
        return out;
    }, "All ISA levels, lowest first.");
    m.def("supported_levels", [] { return names_of(supported_levels()); },
          "The levels this CPU and OS can run (CPUID + XCR0 + AMX permission), lowest first.");
    m.def("selected_level", [](const OptStr& max_isa) { return std::string(level_name(select(max_isa))); },
          "max_isa"_a = nb::none(), "min(best supported, max_isa or else IPEXCONVERT_MAX_ISA).");
    m.def("cpu_features", &cpu_features_dict, "CPUID/XCR0 feature bits and the AMX permission.");
    m.def("kernel_names", [] {
        std::vector<std::string> out;
        for (const char* n : kernel_names()) out.push_back(n);
        return out;
    });
    m.def("kernel_levels", [](const std::string& name) { return names_of(kernel_levels(name.c_str())); }, "name"_a,
          "The levels a kernel was compiled for.");
    m.def("kernel_level", &kernel_level, "name"_a, "max_isa"_a = nb::none(),
          "The level kernel `name` runs at under max_isa.");

    // Kernels: out (and sum_out) are preallocated like x; optional tensors may be None.
    m.def("layer_norm",
          [](nb::handle x, nb::handle residual, nb::handle weight, nb::handle bias, double eps, nb::handle out,
             nb::handle sum_out, const OptStr& max_isa, int threads, nb::handle q_out, double q_scale,
             int q_zero_point, nb::handle q_multipliers) {
              norm(false, x, residual, weight, bias, eps, out, sum_out, max_isa, threads, q_out, q_scale, q_zero_point,
                   q_multipliers);
          },
          "x"_a, "residual"_a.none(), "weight"_a.none(), "bias"_a.none(), "eps"_a, "out"_a, "sum_out"_a.none(),
          "max_isa"_a.none(), "threads"_a, "q_out"_a.none() = nb::none(), "q_scale"_a = 1.0, "q_zero_point"_a = 0,
          "q_multipliers"_a.none() = nb::none());
    m.def("rms_norm",
          [](nb::handle x, nb::handle residual, nb::handle weight, double eps, nb::handle out, nb::handle sum_out,
             const OptStr& max_isa, int threads) {
              norm(true, x, residual, weight, nb::none(), eps, out, sum_out, max_isa, threads);
          },
          "x"_a, "residual"_a.none(), "weight"_a.none(), "eps"_a, "out"_a, "sum_out"_a.none(), "max_isa"_a.none(),
          "threads"_a);
    m.def("softmax", &softmax, "x"_a, "scale"_a, "mask"_a.none(), "out"_a, "max_isa"_a.none(), "threads"_a);
    m.def("attention", &attention, "q"_a, "k"_a, "v"_a, "mask"_a.none(), "out"_a, "scale"_a, "max_isa"_a.none(),
          "threads"_a, "q_scale"_a = 1.0, "q_zero_point"_a = 0, "q_multipliers"_a = nb::none(),
          "out = softmax(q k^T * scale + mask) v: bf16 (AMX or AVX512-BF16) or float32 (AVX-512); an int8/uint8 "
          "out gets it quantized");
    m.def("gelu", &gelu, "x"_a, "tanh"_a, "out"_a, "max_isa"_a.none(), "threads"_a);
    m.def("silu", &silu, "x"_a, "out"_a, "max_isa"_a.none(), "threads"_a);
    m.def("silu_mul", &silu_mul, "a"_a, "b"_a, "out"_a, "max_isa"_a.none(), "threads"_a);
    m.def("quantize", &quantize, "x"_a, "scales"_a, "zero_points"_a, "per_channel"_a, "out"_a, "max_isa"_a.none(),
          "threads"_a);
    m.def("to_channels_last", &to_channels_last, "x"_a, "out"_a, "scale"_a, "zero_point"_a, "max_isa"_a.none(),
          "threads"_a, "x [N, C, H, W] written into out [N, H, W, C]: converted, or quantized for an int8/uint8 out");
    m.def("concat_channels", &concat_channels, "a"_a, "b"_a, "out"_a, "max_isa"_a.none(), "threads"_a,
          "out = cat([a, b], dim=1), a and b with contiguous channels, out channels-last");
    m.def("spatial_mean", &spatial_mean, "x"_a, "channels_last"_a, "out"_a, "max_isa"_a.none(), "threads"_a,
          "out [N, C] = the mean of x over H and W (x NCHW, or its NHWC view with channels_last)");
    m.def("dequantize", &dequantize, "q"_a, "scales"_a, "zero_points"_a, "per_channel"_a, "out"_a, "max_isa"_a.none(),
          "threads"_a);
    m.def("int8_gemm", &int8_gemm, "a"_a, "a_zero_point"_a, "w"_a, "n"_a, "scales"_a, "bias"_a.none(), "relu"_a,
          "out"_a, "out_scale"_a, "out_zero_point"_a, "max_isa"_a.none(), "threads"_a, "residual"_a.none() = nb::none(),
          "residual_scale"_a = 1.0, "residual_zero_point"_a = 0, "conv"_a = nb::none(),
          "out = epilogue((a - a_zero_point) @ W^T), exact int32 products (no VNNI needed); w from pack_int8_weight; "
          "with conv=(kh, kw, sh, sw, ph, pw, dh, dw), a is an NHWC image and the rows are its patches");
    m.def("requantize", &requantize, "acc"_a, "multipliers"_a, "bias"_a.none(), "zero_point"_a, "out"_a,
          "max_isa"_a.none(), "threads"_a);
    m.def("quantize_last_axis", &quantize_last_axis, "x"_a, "inv_scales"_a, "zero_point"_a, "out"_a, "max_isa"_a.none(),
          "threads"_a);
    m.def("embedding", &embedding, "weight"_a, "indices"_a, "out"_a, "max_isa"_a.none(), "threads"_a);
}
