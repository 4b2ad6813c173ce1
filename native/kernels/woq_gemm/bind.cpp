// Python binding of the woq_gemm kernel: checks every tensor and size against each other before the
// kernel reads any of them (the weights come from an artifact), fills the argument struct, runs the
// build for the selected level (compiled once, for the generic level; helpers in native/python/bind_common.h).
#include "bind_common.h"

namespace ipxc {
namespace {

constexpr int64_t kMaxDim = int64_t{1} << 31;  // n and k: keeps every packed size below from overflowing

// out = x @ dequant(W)^T + bias. x: float32 [m, k] (rows may be strided); w and qparams packed as
// args.h says (pack_woq_weight); bias float32 [n] or None; out float32 [m, n] (rows may be strided).
// t as [rows, last dim] float32 rows: 2-D with contiguous rows of any stride, or N-D contiguous (the leading dims
// are the rows). Returns the row stride and sets *rows.
int64_t float_rows(const TensorArg& t, int64_t* rows) {
    if (!t.is_f32() || t.ndim() < 2) fail(std::string(t.name()) + " must be a float32 tensor of 2 or more dims, got " +
                                          t.dtype_str() + " " + t.shape_str());
    const int64_t cols = t.shape(t.ndim() - 1);
    if (t.ndim() == 2) {
        if (t.stride(1) != 1 && cols > 1) fail(std::string(t.name()) + " " + t.shape_str() + " needs contiguous rows");
        if (t.stride(0) < cols && t.shape(0) > 1) fail(std::string(t.name()) + " " + t.shape_str() + " has overlapping rows");
        *rows = t.shape(0);
        return t.shape(0) > 1 ? t.stride(0) : cols;
    }
    if (!t.is_contiguous()) fail(std::string(t.name()) + " " + t.shape_str() + " must be contiguous (or 2-D with contiguous rows)");
    *rows = cols > 0 ? t.size() / cols : 0;
    return cols;
}

void woq_gemm(nb::handle x_obj, nb::handle w_obj, int64_t n, int bits, int64_t group_size, nb::handle qparams_obj,
              bool has_zero, nb::handle bias_obj, nb::handle out_obj, const OptStr& max_isa, int threads, int path,
              nb::handle residual_obj) {
    const TensorArg x(x_obj, "x"), w(w_obj, "w"), qparams(qparams_obj, "qparams"), out(out_obj, "out");
    const auto bias = optional_tensor(bias_obj, "bias");
    const auto residual = optional_tensor(residual_obj, "residual");
    if (!x.on_cpu() || !w.on_cpu() || !qparams.on_cpu() || !out.on_cpu() || (residual && !residual->on_cpu()))
        fail("woq_gemm takes CPU tensors");
    WoqGemmArgs g;
    g.x_stride = float_rows(x, &g.m);
    g.k = x.shape(x.ndim() - 1);
    g.n = n;
    if (bits != 4 && bits != 8) fail("bits = " + std::to_string(bits) + "; woq_gemm takes 4 or 8");
    if (g.k < 1 || g.k >= kMaxDim) fail("k = " + std::to_string(g.k) + " is outside 1.." + std::to_string(kMaxDim - 1));
    if (n < 1 || n >= kMaxDim) fail("n = " + std::to_string(n) + " is outside 1.." + std::to_string(kMaxDim - 1));
    if (group_size < 1 || group_size > g.k || g.k % group_size != 0)
        fail("group_size = " + std::to_string(group_size) + " does not divide k = " + std::to_string(g.k));
    if (bits == 4 && (g.k % 2 != 0 || group_size % 2 != 0))
        fail("4-bit codes come in pairs along k: k = " + std::to_string(g.k) + " and group_size = " +
             std::to_string(group_size) + " must be even");
    if (path < 0 || path > 5)
        fail("path = " + std::to_string(path) + "; use 0 (by rows), 1 (decode), 2 (prefill), 3 (decode on int8 "
             "activations), 4 (int8 weights in k-quads on int8 activations) or 5 (4-bit weights in k-octets on int8 "
             "activations)");
    if (path == 3 && bits != 4) fail("path 3 (int8 activations) takes 4-bit weights; bits = " + std::to_string(bits));
    if (path == 4 && (bits != 8 || g.k % 4 != 0 || group_size % 4 != 0))
        fail("path 4 takes 8-bit weights packed in k-quads: k = " + std::to_string(g.k) + " and group_size = " +
             std::to_string(group_size) + " must be multiples of 4, bits = " + std::to_string(bits) + " must be 8");
    if (path == 5 && (bits != 4 || g.k % 8 != 0 || group_size % 8 != 0))
        fail("path 5 takes 4-bit weights packed in k-octets: k = " + std::to_string(g.k) + " and group_size = " +
             std::to_string(group_size) + " must be multiples of 8, bits = " + std::to_string(bits) + " must be 4");
    const int64_t n16 = (n + 15) / 16 * 16, groups = g.k / group_size;
    check_cpu_contiguous(w);
    const int64_t w_size = bits == 8 ? n16 * g.k : n16 * (g.k / 2);
    const bool w_dtype = bits == 8 ? is(w, nb::dtype<int8_t>()) : is(w, nb::dtype<uint8_t>());
    if (!w_dtype || w.size() != w_size)
        fail("w must be the packed " + std::string(bits == 8 ? "int8" : "uint8") + " weight of " + std::to_string(w_size) +
             " elements (n=" + std::to_string(n) + ", k=" + std::to_string(g.k) + ", bits=" + std::to_string(bits) + "), got " +
             w.dtype_str() + " " + w.shape_str());
    check_cpu_contiguous(qparams);
    // Two planes (scales, zero points) or, for symmetric codes, the scales alone: the sizes differ for every n and k.
    if (!qparams.is_f32() || (qparams.size() != n16 * groups * 2 && qparams.size() != n16 * groups))
        fail("qparams must be the packed float32 scales and zero points of " + std::to_string(n16 * groups * 2) +
             " elements, or the scales alone of " + std::to_string(n16 * groups) + " (n=" + std::to_string(n) + ", " +
             std::to_string(groups) + " groups), got " + qparams.dtype_str() + " " + qparams.shape_str());
    g.qparam_planes = qparams.size() == n16 * groups ? 1 : 2;
    if (bias) g.bias = f32_vector(*bias, n);
    int64_t out_rows = 0;
    g.y_stride = float_rows(out, &out_rows);
    if (out_rows != g.m || out.shape(out.ndim() - 1) != n)
        fail("out " + out.shape_str() + " must hold " + std::to_string(g.m) + " rows of " + std::to_string(n));
    const float* residual_data = nullptr;
    if (residual) {  // a decoder's residual connection, added after the GEMM and bias: one step fewer a layer
        check_cpu_contiguous(*residual);
        if (!residual->is_f32() || residual->size() != g.m * n || residual->shape(residual->ndim() - 1) != n)
            fail("residual must be float32 with out's " + std::to_string(g.m) + " rows of " + std::to_string(n) +
                 ", got " + residual->dtype_str() + " " + residual->shape_str());
        residual_data = static_cast<const float*>(residual->data());
        // The kernels read a row's residual as they store that row's outputs: out must not overwrite it first.
        const int64_t out_bytes = g.m > 0 ? ((g.m - 1) * g.y_stride + n) * 4 : 0;
        if (overlaps(residual_data, g.m * n * 4, out.data(), out_bytes)) fail("residual must not share memory with out");
    }
    g.x = static_cast<const float*>(x.data());
    g.bits = bits;
    g.group_size = group_size;
    g.w = w.data();
    g.qparams = static_cast<const float*>(qparams.data());
    g.has_zero = g.qparam_planes == 2 ? has_zero : bits == 4;  // scales alone: the symmetric zero, 8 or 0
    g.y = static_cast<float*>(out.data());
    g.residual = residual_data;  // summed by the kernels after the GEMM and bias, in their own threads
    g.path = path;
    g.threads = threads;
    if (g.m == 0) return;  // no rows: nothing to compute (the integer paths' row chunking divides by the rows)
    if (path == 3) {
        const auto fn = lookup_woq_gemv_i8(select(max_isa));
        if (fn == nullptr) fail("path 3 (int8 activations) needs avx2; this call is capped below it");
        run_capturable(fn, "woq_gemv_i8", g);
    } else if (path == 4) {
        const auto fn = lookup_woq_gemm_w8a8(select(max_isa));
        if (fn == nullptr) fail("path 4 (int8 weights x int8 activations) needs avx2; this call is capped below it");
        run_capturable(fn, "woq_gemm_w8a8", g);
    } else if (path == 5) {
        const auto fn = lookup_woq_gemm_w4a8(select(max_isa));
        if (fn == nullptr) fail("path 5 (4-bit weights x int8 activations) needs avx512_vnni; this call is capped below it");
        run_capturable(fn, "woq_gemm_w4a8", g);
    } else {
        run_capturable(lookup_woq_gemm(select(max_isa)), "woq_gemm", g);
    }
}

}  // namespace

void bind_woq_gemm(nb::module_& m) {
    m.def("woq_gemm", &woq_gemm, "x"_a, "w"_a, "n"_a, "bits"_a, "group_size"_a, "qparams"_a, "has_zero"_a,
          "bias"_a.none(), "out"_a, "max_isa"_a.none(), "threads"_a, "path"_a = 0, "residual"_a.none() = nb::none(),
          "out = x @ dequant(W)^T + bias (+ residual) for int8 / 4-bit weights with group-wise scales and zero points; w and "
          "qparams from pack_woq_weight (qparams: scales and zero points, or the scales alone for symmetric codes, "
          "has_zero then unused); path 0 picks decode (m <= 4) or prefill, 1 and 2 force one, 3 is the decode path "
          "on int8-quantized x (4-bit weights, avx2 and up; numerically different), 4 int8 weights packed in k-quads on "
          "int8-quantized x (every m, avx2 and up), 5 4-bit weights packed in k-octets on int8-quantized x (every m, "
          "avx512_vnni). x and out: 2-D with contiguous rows, or N-D contiguous (the leading dims are rows)");
}

}  // namespace ipxc
