// Python binding of the norm kernel(s): checks the tensors, fills the argument struct, runs the
// build for the selected level (compiled once, for the generic level; helpers in native/python/bind_common.h).
#include "bind_common.h"

namespace ipxc {
namespace {

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
        run_capturable(lookup_rms_norm(select(max_isa)), "rms_norm", a);
    else
        run_capturable(lookup_layer_norm(select(max_isa)), "layer_norm", a);
}

}  // namespace

void bind_norm(nb::module_& m) {
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
}

}  // namespace ipxc
