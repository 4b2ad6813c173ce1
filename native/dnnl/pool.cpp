// MaxPool on oneDNN primitives kept per input size (see pool.h).
#include "pool.h"

#include <stdexcept>

#include "engine.h"

namespace ipxc_dnnl {

using tag = dnnl::memory::format_tag;

LayerPlan MaxPool::make_plan(int64_t n, int64_t c, int64_t h, int64_t w) {
    const PoolConfig& p = config_;
    const int64_t oh = out_size(h, p.kernel[0], p.stride[0], p.padding[0], p.dilation[0]);
    const int64_t ow = out_size(w, p.kernel[1], p.stride[1], p.padding[1], p.dilation[1]);
    dnnl::memory::desc src({n, c, h, w}, p.type, tag::nhwc), dst({n, c, oh, ow}, p.type, tag::nhwc);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto pd = dnnl::pooling_forward::primitive_desc(
        cpu_engine(), dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_max, src, dst,
        {p.stride[0], p.stride[1]}, {p.kernel[0], p.kernel[1]}, {p.dilation[0] - 1, p.dilation[1] - 1},
        {p.padding[0], p.padding[1]}, {p.padding[0], p.padding[1]}, attr);
    return LayerPlan{dnnl::pooling_forward(pd), dnnl::memory(), pd.scratchpad_desc(), src, dst, pd.impl_info_str()};
}

void MaxPool::run(const void* src, int64_t n, int64_t c, int64_t h, int64_t w, void* dst, int64_t oh, int64_t ow) {
    const auto held = plans_.get({n, c, h, w}, [&] { return make_plan(n, c, h, w); });
    const LayerPlan& plan = *held;
    if (plan.dst.get_dims()[2] != oh || plan.dst.get_dims()[3] != ow)
        throw std::invalid_argument("output size does not match the pooling");
    execute(plan, plan_args(plan, src, dst));
}

}  // namespace ipxc_dnnl
