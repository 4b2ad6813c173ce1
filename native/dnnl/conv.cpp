// Conv on oneDNN primitives kept per input size (see conv.h).
#include "conv.h"

#include "engine.h"

#include <stdexcept>

namespace ipxc_dnnl {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

namespace {

// A 1x1, stride-1, unpadded convolution over NHWC rows is a matmul: [n*h*w, in] x [in, out].
// oneDNN's 1x1 convolution blocks each image's pixels on their own, which leaves AMX tiles partly
// empty when an image has few of them; the matmul runs all n*h*w rows as one M. Measured
// (benchmarks/conv_as_matmul.py and whole-model A/Bs, 2 threads, same process, bit-identical):
// ResNet-50's int8 1x1 layers at 7x7 and batch 16 take 0.32-0.57 of the time (the whole model
// 0.96); at batch 1 the layers alone are even to 0.84 but the whole model took 1.013 (twice); at
// 14x14 and 56x56 the two are even. bf16 went either way by shape, fp32 was even. Hence: int8,
// fewer than 64 pixels per image, at least 256 rows.
bool as_matmul(const ConvConfig& c, int64_t n, int64_t h, int64_t w) {
    const bool pointwise = c.kernel_h == 1 && c.kernel_w == 1 && c.stride[0] == 1 && c.stride[1] == 1 &&
                           c.padding[0] == 0 && c.padding[1] == 0;
    switch (c.pointwise) {
        case ConvConfig::Pointwise::kMatmul: return pointwise;
        case ConvConfig::Pointwise::kConvolution: return false;
        default: return pointwise && c.src == dt::u8 && h * w < 64 && n * h * w >= 256;
    }
}

}  // namespace

Conv::Conv(const ConvConfig& config, const void* weight, const float* w_scales, const float* bias)
    : config_(config) {
    const bool int8 = config.src == dt::u8;
    const dt weight_type = int8 ? dt::s8 : config.src;
    const dnnl::memory::dims wdims{config.out_channels, config.in_channels, config.kernel_h, config.kernel_w};
    weights_.init({wdims, weight_type, tag::oihw}, weight);
    if (bias) {
        bias_ = f32_memory(bias, {config.out_channels});
        // The same values as the matmul's [1, out] bias row.
        bias_row_ = dnnl::memory({{1, config.out_channels}, dt::f32, tag::ab}, cpu_engine(), bias_.get_data_handle());
    }
    if (int8)
        int8_.init(config.x_scale, config.x_zero_point, w_scales, config.out_channels, config.dst == dt::u8,
                   config.y_scale, config.y_zero_point);
}

std::shared_ptr<LayerPlan> Conv::plan_for(int64_t n, int64_t h, int64_t w) {
    return plans_.get({n, 0, h, w}, [&] { return make_plan(n, h, w); });
}

dnnl::primitive_attr Conv::attributes(int weight_mask) const {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    int8_.set_masks(attr, weight_mask);
    dnnl::post_ops post_ops;
    if (config_.sum) post_ops.append_sum(config_.sum_scale, config_.sum_zero_point, config_.sum_type);
    if (config_.relu) post_ops.append_eltwise(dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(post_ops);
    return attr;
}

LayerPlan Conv::make_plan(int64_t n, int64_t h, int64_t w) {
    const ConvConfig& c = config_;
    if (as_matmul(c, n, h, w)) return make_matmul_plan(n * h * w);
    const dt weight_type = c.src == dt::u8 ? dt::s8 : c.src;
    const int64_t oh = out_size(h, c.kernel_h, c.stride[0], c.padding[0], c.dilation[0]);
    const int64_t ow = out_size(w, c.kernel_w, c.stride[1], c.padding[1], c.dilation[1]);
    dnnl::memory::desc src({n, c.in_channels, h, w}, c.src, tag::nhwc);
    dnnl::memory::desc dst({n, c.out_channels, oh, ow}, c.dst, tag::nhwc);
    dnnl::memory::desc weights({c.out_channels, c.in_channels, c.kernel_h, c.kernel_w}, weight_type, tag::any);

    const dnnl::memory::dims strides{c.stride[0], c.stride[1]};
    const dnnl::memory::dims dilates{c.dilation[0] - 1, c.dilation[1] - 1};  // oneDNN counts from 0
    const dnnl::memory::dims pads{c.padding[0], c.padding[1]};
    const dnnl::primitive_attr attr = attributes(1);  // per output channel: the weights' dim 0
    auto pd = bias_
        ? dnnl::convolution_forward::primitive_desc(cpu_engine(), dnnl::prop_kind::forward_inference,
                                                    dnnl::algorithm::convolution_direct, src, weights,
                                                    bias_.get_desc(), dst, strides, dilates, pads, pads, attr)
        : dnnl::convolution_forward::primitive_desc(cpu_engine(), dnnl::prop_kind::forward_inference,
                                                    dnnl::algorithm::convolution_direct, src, weights, dst, strides,
                                                    dilates, pads, pads, attr);
    return LayerPlan{dnnl::convolution_forward(pd), weights_.as(pd.weights_desc()), pd.scratchpad_desc(), src, dst,
                pd.impl_info_str()};
}

LayerPlan Conv::make_matmul_plan(int64_t rows) {
    const ConvConfig& c = config_;
    const dt weight_type = c.src == dt::u8 ? dt::s8 : c.src;
    dnnl::memory::desc src({rows, c.in_channels}, c.src, tag::ab);
    dnnl::memory::desc dst({rows, c.out_channels}, c.dst, tag::ab);
    dnnl::memory::desc weights({c.in_channels, c.out_channels}, weight_type, tag::any);
    const dnnl::primitive_attr attr = attributes(1 << 1);  // per output channel: the matmul's N
    auto pd = bias_ ? dnnl::matmul::primitive_desc(cpu_engine(), src, weights, bias_row_.get_desc(), dst, attr)
                    : dnnl::matmul::primitive_desc(cpu_engine(), src, weights, dst, attr);
    // OIHW with H = W = 1 is [out, in] row-major: the "ba" layout of the matmul's {in, out}.
    const dnnl::memory::desc plain_2d({c.in_channels, c.out_channels}, weight_type, tag::ba);
    return LayerPlan{dnnl::matmul(pd), weights_.as(pd.weights_desc(), plain_2d), pd.scratchpad_desc(), src, dst,
                     pd.impl_info_str()};
}

void Conv::run(const void* src, int64_t n, int64_t h, int64_t w, void* dst, int64_t oh, int64_t ow) {
    const std::shared_ptr<LayerPlan> held = plan_for(n, h, w);
    const LayerPlan& plan = *held;
    const ConvConfig& c = config_;
    if (out_size(h, c.kernel_h, c.stride[0], c.padding[0], c.dilation[0]) != oh ||
        out_size(w, c.kernel_w, c.stride[1], c.padding[1], c.dilation[1]) != ow)
        throw std::invalid_argument("output size does not match the convolution");
    Args args = plan_args(plan, src, dst);
    if (bias_) args[DNNL_ARG_BIAS] = plan.src.get_ndims() == 2 ? bias_row_ : bias_;  // matmul or conv
    int8_.add_args(args);
    execute(plan, args);
}

std::string Conv::implementation(int64_t n, int64_t h, int64_t w) { return plan_for(n, h, w)->implementation; }



}  // namespace ipxc_dnnl
