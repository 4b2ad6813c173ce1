// Python binding of the f32_gemv kernel: checks every tensor and size against each other before the kernel reads
// any of them (the weight comes from an artifact), fills the argument struct, runs the build for the selected level
// (compiled once, for the generic level; helpers in native/python/bind_common.h).
#include "bind_common.h"

namespace ipxc {
namespace {

constexpr int64_t kMaxRows = 4;

// out = x @ w^T + bias: x float32 [..., k] contiguous, or 2-D with contiguous rows of any stride, at most 4 rows;
// w float32 [n, k] contiguous; bias float32 [n] or None; out float32 [..., n] contiguous with x's rows.
void f32_gemv(nb::handle x_obj, nb::handle w_obj, nb::handle bias_obj, nb::handle out_obj, const OptStr& max_isa,
              int threads) {
    const TensorArg x(x_obj, "x"), w(w_obj, "w"), out(out_obj, "out");
    const auto bias = optional_tensor(bias_obj, "bias");
    if (!x.on_cpu() || !w.on_cpu() || !out.on_cpu() || (bias && !bias->on_cpu()))
        fail("x, w, bias and out must be CPU tensors");
    for (const TensorArg* t : {&x, &w, &out})
        if (!t->is_f32() || t->ndim() < 2)
            fail(std::string(t->name()) + " must be a float32 tensor of 2 or more dims, got " + t->dtype_str() + " " +
                 t->shape_str());
    check_cpu_contiguous(w);
    check_cpu_contiguous(out);
    if (w.ndim() != 2) fail("w " + w.shape_str() + " must be [n, k]");
    F32GemvArgs a;
    a.n = w.shape(0), a.k = w.shape(1);
    std::tie(a.m, a.x_stride) = linear_input_rows(x, a.k, kMaxRows, "f32_gemv");
    if (out.shape(out.ndim() - 1) != a.n || out.size() != a.m * a.n)
        fail("out " + out.shape_str() + " must hold " + std::to_string(a.m) + " rows of " + std::to_string(a.n));
    a.bias = f32_vector(bias, a.n);
    a.x = static_cast<const float*>(x.data());
    a.w = static_cast<const float*>(w.data());
    a.y = static_cast<float*>(out.data());
    a.y_stride = a.n;
    a.threads = threads;
    run(lookup_f32_gemv(select(max_isa)), "f32_gemv", a);
}

}  // namespace

void bind_f32_gemv(nb::module_& m) {
    m.def("f32_gemv", &f32_gemv, "x"_a, "w"_a, "bias"_a.none(), "out"_a, "max_isa"_a.none(), "threads"_a,
          "out = x @ w^T + bias for up to 4 rows of float32 x and a float32 [n, k] weight (decode rows), the weight "
          "read once at memory speed");
}

}  // namespace ipxc
