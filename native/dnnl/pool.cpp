// MaxPool on oneDNN primitives kept per input size (see pool.h).
#include "pool.h"

#include <stdexcept>
#include <string>

#include "engine.h"

namespace ipxc_dnnl {

using tag = dnnl::memory::format_tag;

MaxPool::MaxPool(const PoolConfig& config) : config_(config) {
    const char* axes[2] = {"(height)", "(width)"};
    for (int i = 0; i < 2; ++i) {
        check_window(config.kernel[i], config.stride[i], config.padding[i], config.dilation[i], axes[i]);
        const int64_t extent = config.dilation[i] * (config.kernel[i] - 1) + 1;  // both <= kMaxDim: no overflow
        if (2 * config.padding[i] > extent)
            invalid(std::string("padding ") + axes[i] + " " + std::to_string(config.padding[i]) +
                    " is more than half the kernel's extent " + std::to_string(extent));
    }
    check_types(config.type, config.type);
}

std::pair<int64_t, int64_t> MaxPool::output_size(int64_t h, int64_t w) const {
    const PoolConfig& p = config_;
    return {out_size(h, p.kernel[0], p.stride[0], p.padding[0], p.dilation[0]),
            out_size(w, p.kernel[1], p.stride[1], p.padding[1], p.dilation[1])};
}

LayerPlan MaxPool::make_plan(int64_t n, int64_t c, int64_t h, int64_t w) {
    const PoolConfig& p = config_;
    const auto [oh, ow] = output_size(h, w);
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
    check_range(n, 1, "the batch size");
    check_range(c, 1, "the channel count");
    if (output_size(h, w) != std::make_pair(oh, ow)) invalid("output size does not match the pooling");
    const auto held = plans_.get({n, c, h, w}, [&] { return make_plan(n, c, h, w); });
    const LayerPlan& plan = *held;
    execute(plan, plan_args(plan, src, dst));
}

}  // namespace ipxc_dnnl
