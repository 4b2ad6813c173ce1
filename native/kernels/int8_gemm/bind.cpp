// Python binding of the int8_gemm kernels (int8_gemm; int8_amx_gemm, its arithmetic on AMX tiles): checks the tensors,
// fills the argument struct, runs the build for the selected level (helpers in native/python/bind_common.h).
#include "bind_common.h"

namespace ipxc {
namespace {

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

// a as [m, k] uint8 rows (rows may be strided, elements contiguous).
void set_plain_rows(Int8GemmArgs& g, const TensorArg& a) {
    if (!is(a, nb::dtype<uint8_t>()) || a.ndim() != 2) fail("a must be a 2-D uint8 tensor, got " + a.dtype_str() + " " + a.shape_str());
    if (a.stride(1) != 1 || a.stride(0) < a.shape(1)) fail("a " + a.shape_str() + " needs contiguous rows");
    g.m = a.shape(0);
    g.k = a.shape(1);
    g.a_stride = a.stride(0);
}

// k (set with a's rows) and n within the sizes the kernels take: first, as the packed weights' sizes come from them.
void set_sizes(Int8GemmArgs& g, int64_t n) {
    g.n = n;
    if (g.k < 1 || g.k > 65536) fail("k = " + std::to_string(g.k) + " is outside 1..65536 (int32 sums stay exact up to there)");
    if (n < 1 || n > std::numeric_limits<int32_t>::max())  // also keeps the packed sizes from overflowing
        fail("n = " + std::to_string(n) + " is outside 1.." + std::to_string(std::numeric_limits<int32_t>::max()));
}

// What int8_gemm and int8_amx_gemm check and fill alike once a's rows and the sizes are set: a's zero point, the
// epilogue's vectors, out and the residual.
void set_epilogue(Int8GemmArgs& g, const TensorArg& a, int a_zero_point, int64_t n, nb::handle scales_obj,
                  nb::handle bias_obj, bool relu, const TensorArg& out, double out_scale, int out_zero_point,
                  int threads, nb::handle residual_obj, double residual_scale, int residual_zero_point, bool gelu,
                  nb::handle multiplier_obj) {
    const auto bias = optional_tensor(bias_obj, "bias");
    const auto residual = optional_tensor(residual_obj, "residual");
    const auto multiplier = optional_tensor(multiplier_obj, "multiplier");
    if (a_zero_point < 0 || a_zero_point > 255) fail("a_zero_point " + std::to_string(a_zero_point) + " is outside 0..255");
    g.scales = f32_vector(TensorArg(scales_obj, "scales"), n);
    if (bias) g.bias = f32_vector(*bias, n);
    if (multiplier) g.col_multiplier = f32_vector(*multiplier, n);
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
    g.relu = relu;
    g.gelu = gelu;
    g.y = out.data();
    g.y_stride = out.stride(0);
    g.threads = threads;
}

void int8_gemm(nb::handle a_obj, int a_zero_point, nb::handle w_obj, int64_t n, nb::handle scales_obj,
               nb::handle bias_obj, bool relu, nb::handle out_obj, double out_scale, int out_zero_point,
               const OptStr& max_isa, int threads, nb::handle residual_obj, double residual_scale,
               int residual_zero_point, const std::optional<std::vector<int64_t>>& conv, bool gelu,
               nb::handle multiplier_obj) {
    const TensorArg a(a_obj, "a"), w(w_obj, "w"), out(out_obj, "out");
    Int8GemmArgs g;
    if (!a.on_cpu() || !out.on_cpu() || !w.on_cpu()) fail("int8_gemm takes CPU tensors");
    if (conv)
        set_conv_rows(g, a, *conv);
    else
        set_plain_rows(g, a);
    set_sizes(g, n);
    check_cpu_contiguous(w);
    const int64_t n16 = (n + 15) / 16 * 16, k2 = (g.k + 1) / 2 * 2;
    if (!is(w, nb::dtype<int16_t>()) || w.size() != n16 * k2)
        fail("w must be the packed int16 weight of " + std::to_string(n16 * k2) + " elements (n=" + std::to_string(n) +
             ", k=" + std::to_string(g.k) + "), got " + w.dtype_str() + " " + w.shape_str());
    g.w = static_cast<const int16_t*>(w.data());
    set_epilogue(g, a, a_zero_point, n, scales_obj, bias_obj, relu, out, out_scale, out_zero_point, threads,
                 residual_obj, residual_scale, residual_zero_point, gelu, multiplier_obj);
    run_capturable(lookup_int8_gemm(select(max_isa)), "int8_gemm", g);
}

// int8_amx_gemm: int8_gemm's arithmetic on AMX tiles for linear layers: w_amx int8 [n / 32, k / 64, 16, 32, 4]
// (args.h), w_sums int32 [n]; n and k multiples of 32 and 64.
void int8_amx_gemm(nb::handle a_obj, int a_zero_point, nb::handle w_obj, nb::handle w_sums_obj, int64_t n,
                   nb::handle scales_obj, nb::handle bias_obj, bool relu, nb::handle out_obj, double out_scale,
                   int out_zero_point, const OptStr& max_isa, int threads, nb::handle residual_obj,
                   double residual_scale, int residual_zero_point, bool gelu, nb::handle multiplier_obj) {
    const TensorArg a(a_obj, "a"), w(w_obj, "w"), w_sums(w_sums_obj, "w_sums"), out(out_obj, "out");
    Int8GemmArgs g;
    if (!a.on_cpu() || !out.on_cpu() || !w.on_cpu() || !w_sums.on_cpu()) fail("int8_amx_gemm takes CPU tensors");
    set_plain_rows(g, a);
    set_sizes(g, n);
    if (n % 32 || g.k % 64) fail("int8_amx_gemm needs n and k multiples of 32 and 64, got n=" + std::to_string(n) +
                                 ", k=" + std::to_string(g.k));
    check_cpu_contiguous(w);
    check_cpu_contiguous(w_sums);
    if (!is(w, nb::dtype<int8_t>()) || w.ndim() != 5 || w.shape(0) != n / 32 || w.shape(1) != g.k / 64 ||
        w.shape(2) != 16 || w.shape(3) != 32 || w.shape(4) != 4)
        fail("w must be the packed int8 weight [" + std::to_string(n / 32) + ", " + std::to_string(g.k / 64) +
             ", 16, 32, 4], got " + w.dtype_str() + " " + w.shape_str());
    if (!is(w_sums, nb::dtype<int32_t>()) || w_sums.ndim() != 1 || w_sums.shape(0) != n)
        fail("w_sums must be int32 [" + std::to_string(n) + "], got " + w_sums.dtype_str() + " " + w_sums.shape_str());
    g.w_amx = static_cast<const int8_t*>(w.data());
    g.w_sums = static_cast<const int32_t*>(w_sums.data());
    set_epilogue(g, a, a_zero_point, n, scales_obj, bias_obj, relu, out, out_scale, out_zero_point, threads,
                 residual_obj, residual_scale, residual_zero_point, gelu, multiplier_obj);
    const Level level = select(max_isa);
    if (level < Level::amx) fail("int8_amx_gemm needs the amx level; this call's level is " + std::string(level_name(level)));
    run_capturable(lookup_int8_amx_gemm(level), "int8_amx_gemm", g);
}

}  // namespace

void bind_int8_gemm(nb::module_& m) {
    m.def("int8_gemm", &int8_gemm, "a"_a, "a_zero_point"_a, "w"_a, "n"_a, "scales"_a, "bias"_a.none(), "relu"_a,
          "out"_a, "out_scale"_a, "out_zero_point"_a, "max_isa"_a.none(), "threads"_a, "residual"_a.none() = nb::none(),
          "residual_scale"_a = 1.0, "residual_zero_point"_a = 0, "conv"_a = nb::none(),
          "gelu"_a = false, "multiplier"_a.none() = nb::none(),
          "out = epilogue((a - a_zero_point) @ W^T), exact int32 products (no VNNI needed); w from pack_int8_weight; "
          "with conv=(kh, kw, sh, sw, ph, pw, dh, dw), a is an NHWC image and the rows are its patches; gelu: the erf "
          "GELU after relu and the residual; multiplier: n float32 factors after that");
    m.def("int8_amx_gemm", &int8_amx_gemm, "a"_a, "a_zero_point"_a, "w"_a, "w_sums"_a, "n"_a, "scales"_a,
          "bias"_a.none(), "relu"_a, "out"_a, "out_scale"_a, "out_zero_point"_a, "max_isa"_a.none(), "threads"_a,
          "residual"_a.none() = nb::none(), "residual_scale"_a = 1.0, "residual_zero_point"_a = 0, "gelu"_a = false,
          "multiplier"_a.none() = nb::none(),
          "int8_gemm's out = epilogue((a - a_zero_point) @ W^T) on AMX tiles (tdpbusd, exact int32 sums) for a linear "
          "layer; w from pack_int8_amx_weight (int8 [n / 32, k / 64, 16, 32, 4]) and w_sums[n] = sum_k W[n, k]");
}

}  // namespace ipxc
