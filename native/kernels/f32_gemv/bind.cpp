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
    const LinearOperands o = linear_operands(x, w, out, optional_tensor(bias_obj, "bias"), false, kMaxRows,
                                             "f32_gemv");
    F32GemvArgs a;
    a.m = o.m, a.n = o.n, a.k = o.k, a.x_stride = o.x_stride, a.bias = o.bias;
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
