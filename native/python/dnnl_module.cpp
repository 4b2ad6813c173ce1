// ipexconvert._dnnl: bindings of the direct oneDNN layers (native/dnnl/). A module of its own so
// that the main kernel library loads even where oneDNN is missing. Tensors arrive through
// DLPack (tensor_arg.h); the GIL is released while a primitive runs.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>

#include "../dnnl/conv.h"
#include "../dnnl/engine.h"
#include "../dnnl/linear.h"
#include "../dnnl/pool.h"
#include "tensor_arg.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using ipxc::TensorArg;
using dt = dnnl::memory::data_type;
using Pair = std::tuple<int64_t, int64_t>;

[[noreturn]] void fail(const std::string& message) { throw std::invalid_argument(message); }

dt data_type(const std::string& name) {
    if (name == "uint8") return dt::u8;
    if (name == "bfloat16") return dt::bf16;
    if (name == "float32") return dt::f32;
    if (name.empty()) return dt::undef;
    fail("unsupported data type " + name + " (uint8, bfloat16 or float32)");
}

void check_cpu_contiguous(const TensorArg& t) {
    if (!t.on_cpu() || !t.is_contiguous()) fail(std::string(t.name()) + " must be a contiguous CPU tensor");
}

// [n, c, h, w] in channels-last memory order (NHWC), as the primitives read and write it.
void check_nhwc(const TensorArg& t) {
    if (!t.on_cpu() || t.ndim() != 4) fail(std::string(t.name()) + " must be a 4-D CPU tensor");
    const int64_t c = t.shape(1), h = t.shape(2), w = t.shape(3);
    const bool nhwc = t.stride(1) == 1 && (w == 1 || t.stride(3) == c) && (h == 1 || t.stride(2) == w * c) &&
                      (t.shape(0) == 1 || t.stride(0) == h * w * c);
    if (!nhwc) fail(std::string(t.name()) + " " + t.shape_str() + " must be channels-last (torch.channels_last)");
}

// Our post-op names (ir/postops.py) -> oneDNN eltwise algorithm and its alpha.
std::pair<dnnl::algorithm, float> eltwise(const std::string& name) {
    static const std::map<std::string, std::pair<dnnl::algorithm, float>> algorithms{
        {"", {dnnl::algorithm::undef, 0.f}},
        {"relu", {dnnl::algorithm::eltwise_relu, 0.f}},
        {"gelu", {dnnl::algorithm::eltwise_gelu_erf, 0.f}},
        {"gelu_tanh", {dnnl::algorithm::eltwise_gelu_tanh, 0.f}},
        {"silu", {dnnl::algorithm::eltwise_swish, 1.f}},
        {"sigmoid", {dnnl::algorithm::eltwise_logistic, 0.f}},
        {"tanh", {dnnl::algorithm::eltwise_tanh, 0.f}},
    };
    auto found = algorithms.find(name);
    if (found == algorithms.end()) fail("unsupported post-op " + name + " (relu, gelu, gelu_tanh, silu, sigmoid, tanh)");
    return found->second;
}

// Weight dtype size must match the activations: int8 weights for uint8, else the same float type.
void check_weight_dtype(const TensorArg& w, dt src, const std::string& src_name) {
    const size_t weight_bytes = src == dt::u8 ? 1 : (src == dt::bf16 ? 2 : 4);
    if (static_cast<size_t>(w.dtype().bits / 8) != weight_bytes)
        fail("weight has dtype " + w.dtype_str() + ", which does not go with " + src_name + " activations");
}

// Optional float32 [channels] vectors (w_scales, bias): null when None.
const float* f32_channels(nb::handle value, const char* name, int64_t channels, std::optional<TensorArg>& holder) {
    if (value.is_none()) return nullptr;
    holder.emplace(value, name);
    check_cpu_contiguous(*holder);
    if (!holder->is_f32() || holder->size() != channels)
        fail(std::string(name) + " must be float32 [" + std::to_string(channels) + "]");
    return static_cast<const float*>(holder->data());
}

// What every weighted layer's __init__ ends with, after its own config fields: the int8 fields,
// the weight's dtype check, the optional per-channel vectors, then the layer (which copies them).
template <class Layer, class Config>
void construct(Layer* self, Config& c, const TensorArg& w, const std::string& src, nb::handle w_scales,
               nb::handle bias, int64_t channels, float x_scale, int32_t x_zero_point, float y_scale,
               int32_t y_zero_point) {
    c.x_scale = x_scale, c.x_zero_point = x_zero_point, c.y_scale = y_scale, c.y_zero_point = y_zero_point;
    check_weight_dtype(w, c.src, src);
    std::optional<TensorArg> s, b;
    const float* scales = f32_channels(w_scales, "w_scales", channels, s);
    const float* bias_data = f32_channels(bias, "bias", channels, b);
    new (self) Layer(c, w.data(), scales, bias_data);
}

void init_conv(ipxc_dnnl::Conv* self, nb::handle weight, nb::handle w_scales, nb::handle bias, Pair stride, Pair padding,
                           Pair dilation, const std::string& src, const std::string& dst, bool relu, bool sum,
                           const std::string& sum_type, float sum_scale, int32_t sum_zero_point, float x_scale,
                           int32_t x_zero_point, float y_scale, int32_t y_zero_point, const std::string& lowering) {
    TensorArg w(weight, "weight");
    check_cpu_contiguous(w);
    if (w.ndim() != 4) fail("weight must be OIHW");
    ipxc_dnnl::ConvConfig c;
    c.out_channels = w.shape(0), c.in_channels = w.shape(1), c.kernel_h = w.shape(2), c.kernel_w = w.shape(3);
    c.stride[0] = std::get<0>(stride), c.stride[1] = std::get<1>(stride);
    c.padding[0] = std::get<0>(padding), c.padding[1] = std::get<1>(padding);
    c.dilation[0] = std::get<0>(dilation), c.dilation[1] = std::get<1>(dilation);
    c.src = data_type(src), c.dst = data_type(dst);
    c.relu = relu, c.sum = sum, c.sum_type = data_type(sum_type), c.sum_scale = sum_scale;
    c.sum_zero_point = sum_zero_point;
    using L = ipxc_dnnl::ConvConfig::Lowering;
    if (lowering == "auto") c.lowering = L::kAuto;
    else if (lowering == "matmul") c.lowering = L::kMatmul;
    else if (lowering == "convolution") c.lowering = L::kConvolution;
    else fail("lowering must be 'auto', 'matmul' or 'convolution', not '" + lowering + "'");
    construct(self, c, w, src, w_scales, bias, c.out_channels, x_scale, x_zero_point, y_scale, y_zero_point);
}

void run_conv(ipxc_dnnl::Conv& conv, nb::handle x, nb::handle out) {
    TensorArg src(x, "x"), dst(out, "out");
    check_nhwc(src);
    check_nhwc(dst);
    const int64_t n = src.shape(0), h = src.shape(2), w = src.shape(3), oh = dst.shape(2), ow = dst.shape(3);
    if (dst.shape(0) != n) fail("out has another batch size than x");
    nb::gil_scoped_release release;
    conv.run(src.data(), n, h, w, dst.data(), oh, ow);
}

void init_linear(ipxc_dnnl::Linear* self, nb::handle weight, nb::handle w_scales, nb::handle bias,
                 const std::string& src, const std::string& dst, const std::string& post_op, nb::handle multiplier,
                 float x_scale, int32_t x_zero_point, float y_scale, int32_t y_zero_point) {
    TensorArg w(weight, "weight");
    check_cpu_contiguous(w);
    if (w.ndim() != 2) fail("weight must be [out_features, in_features]");
    ipxc_dnnl::LinearConfig c;
    c.out_features = w.shape(0), c.in_features = w.shape(1);
    c.src = data_type(src), c.dst = data_type(dst);
    std::tie(c.eltwise, c.eltwise_alpha) = eltwise(post_op);
    std::optional<TensorArg> m;
    if (const float* factors = f32_channels(multiplier, "multiplier", c.out_features, m))
        c.multiplier.assign(factors, factors + c.out_features);
    construct(self, c, w, src, w_scales, bias, c.out_features, x_scale, x_zero_point, y_scale, y_zero_point);
}

// x: [..., in_features], out: [..., out_features], both contiguous with the same leading dims.
void run_linear(ipxc_dnnl::Linear& linear, nb::handle x, nb::handle out) {
    TensorArg src(x, "x"), dst(out, "out");
    check_cpu_contiguous(src);
    check_cpu_contiguous(dst);
    const int64_t k = linear.in_features(), n = linear.out_features();
    if (src.ndim() < 1 || src.shape(src.ndim() - 1) != k)
        fail("x " + src.shape_str() + " must end in in_features (" + std::to_string(k) + ")");
    bool same_lead = dst.ndim() == src.ndim() && dst.shape(dst.ndim() - 1) == n;
    for (int i = 0; same_lead && i + 1 < src.ndim(); ++i) same_lead = src.shape(i) == dst.shape(i);
    if (!same_lead)
        fail("out " + dst.shape_str() + " must be x's leading dims then out_features (" + std::to_string(n) + ")");
    const int64_t rows = src.size() / k;
    if (rows == 0) return;
    nb::gil_scoped_release release;
    linear.run(src.data(), rows, dst.data());
}

void init_max_pool(ipxc_dnnl::MaxPool* self, Pair kernel, Pair stride, Pair padding, Pair dilation,
                   const std::string& type) {
    ipxc_dnnl::PoolConfig p;
    p.kernel[0] = std::get<0>(kernel), p.kernel[1] = std::get<1>(kernel);
    p.stride[0] = std::get<0>(stride), p.stride[1] = std::get<1>(stride);
    p.padding[0] = std::get<0>(padding), p.padding[1] = std::get<1>(padding);
    p.dilation[0] = std::get<0>(dilation), p.dilation[1] = std::get<1>(dilation);
    p.type = data_type(type);
    new (self) ipxc_dnnl::MaxPool(p);
}

void run_max_pool(ipxc_dnnl::MaxPool& pool, nb::handle x, nb::handle out) {
    TensorArg src(x, "x"), dst(out, "out");
    check_nhwc(src);
    check_nhwc(dst);
    if (dst.shape(0) != src.shape(0) || dst.shape(1) != src.shape(1)) fail("out must have x's batch and channels");
    if (!(src.dtype() == dst.dtype())) fail("out must have x's dtype");
    nb::gil_scoped_release release;
    pool.run(src.data(), src.shape(0), src.shape(1), src.shape(2), src.shape(3), dst.data(), dst.shape(2), dst.shape(3));
}

}  // namespace

NB_MODULE(_dnnl, m) {
    m.doc() = "ipexconvert's direct oneDNN layers (see native/dnnl/conv.h)";
    nb::class_<ipxc_dnnl::Conv>(m, "Conv")
        .def("__init__", &init_conv,
             "weight"_a, "w_scales"_a.none(), "bias"_a.none(), "stride"_a, "padding"_a, "dilation"_a, "src"_a,
             "dst"_a, "relu"_a = false, "sum"_a = false, "sum_type"_a = "", "sum_scale"_a = 1.f,
             "sum_zero_point"_a = 0, "x_scale"_a = 1.f, "x_zero_point"_a = 0, "y_scale"_a = 1.f,
             "y_zero_point"_a = 0, "lowering"_a = "auto")
        .def("run", &run_conv, "x"_a, "out"_a,
             "out = conv(x) (+ the residual already in out), x and out channels-last")
        .def("implementation", &ipxc_dnnl::Conv::implementation, "n"_a, "h"_a, "w"_a)
        .def("plan_count", &ipxc_dnnl::Conv::plan_count);
    nb::class_<ipxc_dnnl::Linear>(m, "Linear")
        .def("__init__", &init_linear, "weight"_a, "w_scales"_a.none(), "bias"_a.none(), "src"_a, "dst"_a,
             "post_op"_a = "", "multiplier"_a.none() = nb::none(), "x_scale"_a = 1.f, "x_zero_point"_a = 0,
             "y_scale"_a = 1.f, "y_zero_point"_a = 0)
        .def("run", &run_linear, "x"_a, "out"_a,
             "out = post_op(x @ weight^T + bias) * multiplier, x and out contiguous")
        .def_prop_ro("in_features", &ipxc_dnnl::Linear::in_features)
        .def_prop_ro("out_features", &ipxc_dnnl::Linear::out_features)
        .def("implementation", &ipxc_dnnl::Linear::implementation, "rows"_a)
        .def("plan_count", &ipxc_dnnl::Linear::plan_count);
    nb::class_<ipxc_dnnl::MaxPool>(m, "MaxPool")
        .def("__init__", &init_max_pool, "kernel"_a, "stride"_a, "padding"_a, "dilation"_a, "type"_a)
        .def("run", &run_max_pool, "x"_a, "out"_a, "out = max_pool2d(x), x and out channels-last");
    m.def("set_max_isa", &ipxc_dnnl::set_max_isa, "isa"_a);
    m.def("version", [] {
        const dnnl_version_t* v = dnnl_version();
        return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
    });
}
