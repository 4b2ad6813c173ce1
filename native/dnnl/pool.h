// 2-D max pooling on oneDNN primitives kept per input size, NHWC tensors owned by the caller.
// torch's channels-last bfloat16 max_pool2d measured 579 us at ResNet-50's [1, 64, 112, 112]
// (10.2 ms at batch 16); this is the same pooling on oneDNN's jit kernels.
#pragma once

#include <dnnl.hpp>

#include <cstdint>
#include <string>
#include <utility>

#include "layer_plan.h"
#include "plan_cache.h"

namespace ipxc_dnnl {

struct PoolConfig {
    int64_t kernel[2] = {1, 1}, stride[2] = {1, 1}, padding[2] = {0, 0}, dilation[2] = {1, 1};
    dnnl::memory::data_type type = dnnl::memory::data_type::f32;  // u8, bf16 or f32, in and out
};

class MaxPool {
  public:
    // Checks the config: window geometry in range, padding at most half the dilated kernel (as
    // torch's max_pool2d: no window lies wholly in the padding), an activation type.
    explicit MaxPool(const PoolConfig& config);

    // src: NHWC [n, c, h, w]; dst: NHWC [n, c, oh, ow], of the config's type (the caller checks
    // the buffers). Throws std::invalid_argument unless (oh, ow) is the output size for (h, w).
    void run(const void* src, int64_t n, int64_t c, int64_t h, int64_t w, void* dst, int64_t oh, int64_t ow);

    // (oh, ow) for an input of (h, w); throws when the input cannot hold the kernel.
    std::pair<int64_t, int64_t> output_size(int64_t h, int64_t w) const;

    const PoolConfig& config() const { return config_; }

  private:
    LayerPlan make_plan(int64_t n, int64_t c, int64_t h, int64_t w);

    PoolConfig config_;
    PlanCache<LayerPlan> plans_;  // per input (n, c, h, w)
};

}  // namespace ipxc_dnnl
