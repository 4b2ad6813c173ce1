// Python binding of the bf16_amx_gemm kernel: checks every tensor and size against each other before the kernel
// reads any of them (the weight comes from an artifact), fills the argument struct, runs the amx build (the only
// one: a lower level is refused; helpers in native/python/bind_common.h).
#include "bind_common.h"

namespace ipxc {
namespace {

int unary_code(const std::string& unary) {
    if (unary == "none") return 0;
    if (unary == "relu") return 1;
    if (unary == "gelu") return 2;
    fail("unary must be 'none', 'relu' or 'gelu' (the erf GELU), got '" + unary + "'");
}

// out = unary(x @ w^T + bias): x bfloat16 [..., k] contiguous, or 2-D with contiguous rows of any stride; w the
// packed weight, bfloat16 [n / 32, k / 32, 16, 32, 2] contiguous (args.h); bias float32 [n] or None; out bfloat16
// [..., n] contiguous with x's rows.
void bf16_amx_gemm(nb::handle x_obj, nb::handle w_obj, nb::handle bias_obj, nb::handle out_obj, const OptStr& max_isa,
                   int threads, const std::string& unary) {
    const TensorArg x(x_obj, "x"), w(w_obj, "w"), out(out_obj, "out");
    const std::optional<TensorArg> bias = optional_tensor(bias_obj, "bias");
    if (!x.on_cpu() || !w.on_cpu() || !out.on_cpu() || (bias && !bias->on_cpu()))
        fail("x, w, bias and out must be CPU tensors");
    check_cpu_contiguous(w);
    check_cpu_contiguous(out);
    if (!w.is_bf16() || w.ndim() != 5 || w.shape(2) != 16 || w.shape(3) != 32 || w.shape(4) != 2)
        fail("w must be the packed bfloat16 weight [n / 32, k / 32, 16, 32, 2], got " + w.dtype_str() + " " +
             w.shape_str());
    for (const TensorArg* t : {&x, &out})
        if (!t->is_bf16() || t->ndim() < 2)
            fail(std::string(t->name()) + " must be a bfloat16 tensor of 2 or more dims, got " + t->dtype_str() + " " +
                 t->shape_str());
    Bf16AmxGemmArgs a;
    a.n = w.shape(0) * 32;
    a.k = w.shape(1) * 32;
    std::tie(a.m, a.x_stride) = linear_input_rows(x, a.k, std::numeric_limits<int64_t>::max(), "bf16_amx_gemm");
    if (out.shape(out.ndim() - 1) != a.n || out.size() != a.m * a.n)
        fail("out " + out.shape_str() + " must hold " + std::to_string(a.m) + " rows of " + std::to_string(a.n));
    if (overlaps(x.data(), (a.m > 0 ? (a.m - 1) * a.x_stride + a.k : 0) * 2, out.data(), a.m * a.n * 2))
        fail("out must not share memory with x");
    a.bias = f32_vector(bias, a.n);
    a.x = static_cast<const uint16_t*>(x.data());
    a.w = static_cast<const uint16_t*>(w.data());
    a.y = static_cast<uint16_t*>(out.data());
    a.y_stride = a.n;
    a.unary = unary_code(unary);
    a.threads = threads;
    const Level level = select(max_isa);
    if (level < Level::amx) fail("bf16_amx_gemm needs the amx level; this call's level is " + std::string(level_name(level)));
    run_capturable(lookup_bf16_amx_gemm(level), "bf16_amx_gemm", a);
}

}  // namespace

void bind_bf16_amx_gemm(nb::module_& m) {
    m.def("bf16_amx_gemm", &bf16_amx_gemm, "x"_a, "w"_a, "bias"_a.none(), "out"_a, "max_isa"_a.none(), "threads"_a,
          "unary"_a = "none",
          "out = unary(x @ w^T + bias) on AMX tiles for bfloat16 x and a weight packed as [n / 32, k / 32, 16, 32, 2] "
          "(pairs of k for 32 channels side by side), summed in float32, rounded to bfloat16 once; unary 'none', "
          "'relu' or 'gelu' (erf)");
}

}  // namespace ipxc
