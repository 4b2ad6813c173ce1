// Conv on oneDNN primitives kept per input size (see conv.h).
#include "conv.h"

#include "engine.h"

#include <stdexcept>

namespace ipxc_dnnl {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

Conv::Conv(const ConvConfig& config, const void* weight, const float* w_scales, const float* bias)
    : config_(config) {
    const bool int8 = config.src == dt::u8;
    const dt weight_type = int8 ? dt::s8 : config.src;
    const dnnl::memory::dims wdims{config.out_channels, config.in_channels, config.kernel_h, config.kernel_w};
    weights_.init({wdims, weight_type, tag::oihw}, weight);
    if (bias) bias_ = f32_memory(bias, {config.out_channels});
    if (int8)
        int8_.init(config.x_scale, config.x_zero_point, w_scales, config.out_channels, config.dst == dt::u8,
                   config.y_scale, config.y_zero_point);
}

std::shared_ptr<LayerPlan> Conv::plan_for(int64_t n, int64_t h, int64_t w) {
    return plans_.get({n, 0, h, w}, [&] { return make_plan(n, h, w); });
}

LayerPlan Conv::make_plan(int64_t n, int64_t h, int64_t w) {
    const ConvConfig& c = config_;
    const bool int8 = c.src == dt::u8;
    const int64_t oh = out_size(h, c.kernel_h, c.stride[0], c.padding[0], c.dilation[0]);
    const int64_t ow = out_size(w, c.kernel_w, c.stride[1], c.padding[1], c.dilation[1]);
    dnnl::memory::desc src({n, c.in_channels, h, w}, c.src, tag::nhwc);
    dnnl::memory::desc dst({n, c.out_channels, oh, ow}, c.dst, tag::nhwc);
    dnnl::memory::desc weights({c.out_channels, c.in_channels, c.kernel_h, c.kernel_w}, int8 ? dt::s8 : c.src, tag::any);

    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    int8_.set_masks(attr, 1);  // per output channel (the weights' dim 0)
    dnnl::post_ops post_ops;
    if (c.sum) post_ops.append_sum(c.sum_scale, c.sum_zero_point, c.sum_type);
    if (c.relu) post_ops.append_eltwise(dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(post_ops);

    const dnnl::memory::dims strides{c.stride[0], c.stride[1]};
    const dnnl::memory::dims dilates{c.dilation[0] - 1, c.dilation[1] - 1};  // oneDNN counts from 0
    const dnnl::memory::dims pads{c.padding[0], c.padding[1]};
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

void Conv::run(const void* src, int64_t n, int64_t h, int64_t w, void* dst, int64_t oh, int64_t ow) {
    const std::shared_ptr<LayerPlan> held = plan_for(n, h, w);
    const LayerPlan& plan = *held;
    if (plan.dst.get_dims()[2] != oh || plan.dst.get_dims()[3] != ow)
        throw std::invalid_argument("output size does not match the convolution");
    Args args = plan_args(plan, src, dst);
    if (bias_) args[DNNL_ARG_BIAS] = bias_;
    int8_.add_args(args);
    execute(plan, args);
}

std::string Conv::implementation(int64_t n, int64_t h, int64_t w) { return plan_for(n, h, w)->implementation; }



}  // namespace ipxc_dnnl
