// A 2-D convolution run directly on oneDNN primitives, created once per input size and kept.
//
// torch's oneDNN operators rebuild their oneDNN objects on every call (55-77 us per call measured
// on a conv whose oneDNN execution takes a few us, docs/quantization.md); here the primitive, its
// packed weights and its scratchpad live as long as the layer. Activations are NHWC
// (channels-last) tensors owned by the caller, which also allocates the output.
//
// Covers what ResNet-style models need: int8 (uint8 activations with a zero point, int8 weights
// with per-output-channel scales, float32 bias, uint8 / bfloat16 / float32 output) and float
// (bfloat16 or float32 throughout, float32 bias); post-ops: an optional residual sum into the
// output buffer, then an optional ReLU. Some int8 layers over small images in a batch run as a
// oneDNN matmul over their NHWC (1x1) or im2col rows instead (see conv.cpp).
#pragma once

#include <dnnl.hpp>

#include "int8_params.h"
#include "packed_weights.h"
#include "layer_plan.h"
#include "plan_cache.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace ipxc_dnnl {

struct ConvConfig {
    int64_t in_channels = 0, out_channels = 0, kernel_h = 0, kernel_w = 0;
    int64_t stride[2] = {1, 1}, padding[2] = {0, 0}, dilation[2] = {1, 1};
    dnnl::memory::data_type src = dnnl::memory::data_type::f32;  // u8, bf16 or f32
    dnnl::memory::data_type dst = dnnl::memory::data_type::f32;  // u8, bf16 or f32
    bool relu = false;
    // Residual sum: out = conv + sum_scale * (out_before - sum_zero_point), before the relu.
    bool sum = false;
    dnnl::memory::data_type sum_type = dnnl::memory::data_type::undef;  // undef: the output's
    float sum_scale = 1.f;
    int32_t sum_zero_point = 0;
    // int8 only (src u8): x_real = x_scale * (x - x_zero_point); y = y_real / y_scale + y_zero_point.
    float x_scale = 1.f, y_scale = 1.f;
    int32_t x_zero_point = 0, y_zero_point = 0;
    // Whether the conv runs as a matmul over its (im2col) rows: kAuto where measured faster (int8
    // 1x1 stride-1 and 3x3 stride-2 layers with small output images in a batch, conv.cpp); the
    // other two force one (for comparisons; kMatmul lowers 1x1 stride-1 convs and uint8 ones).
    enum class Lowering { kAuto, kMatmul, kConvolution } lowering = Lowering::kAuto;
};

class Conv {
  public:
    // weight: OIHW (contiguous, weight_bytes long), int8 (with w_scales, one per output channel)
    // or the src type. bias: float32 [out_channels] or null. Both are copied: the caller may free
    // them. The config is checked first (geometry in range, types, quantization); a weight of
    // another size than its geometry says is refused.
    Conv(const ConvConfig& config, const void* weight, size_t weight_bytes, const float* w_scales, const float* bias);

    // src: NHWC [n, c, h, w]; dst: NHWC [n, oc, oh, ow], holding the residual when config.sum is
    // set. Throws std::invalid_argument unless c and oc are the layer's channels and (oh, ow) its
    // output size for (h, w); the caller has checked that the buffers are dense NHWC of these
    // sizes and of the config's types.
    // fold: run each image's rows as that many images (folds(), else std::invalid_argument).
    // side_by_side: run the batch's images as one image, side by side (SideBySide), with n >= 2.
    // stack: run the batch's images as one image of n * h rows (stacks()). One of the three at most.
    void run(const void* src, int64_t n, int64_t c, int64_t h, int64_t w, void* dst, int64_t oc, int64_t oh,
             int64_t ow, int64_t fold = 1, bool side_by_side = false, bool stack = false);
    // Whether an input of h rows can run folded: oneDNN 3.2 splits a 1x1 layer's work among threads
    // by images and blocks of an image's pixels, and at batch 1 that often left one of two threads
    // idle (a bf16 256 -> 1024 layer at 14x14 took 61 us on 2 threads and 60 on 1; folded, 35). In
    // NHWC n images of h rows are byte for byte n * k images of h / k rows, and a 1x1 layer
    // computes each pixel alone: so a fold k needs a 1x1 unpadded layer whose output rows (oh) k
    // divides and whose input rows are stride * oh (each folded image's rows map onto its own
    // output rows). Whether it is faster is measured per layer in the model
    // (backends/cpu/kernels/_onednn_direct_conv.py).
    bool folds(int64_t fold, int64_t h) const;
    // Whether a batch of images of h rows can run as one image of n * h rows, the bytes as they are:
    // the rows of a 1x1 unpadded layer whose input rows are stride * its output rows (as for a fold).
    // At 7x7, batch 16, bf16 1x1 layers of ResNet-50's last stage ran 0.75-0.8 x their time so.
    bool stacks(int64_t h) const;
    // A batch of n images w pixels wide run as one image of n * period pixels: image i copied to
    // columns [i * period, i * period + w), `gap` = period - w columns between them that read as
    // zero (an int8 layer's input zero point), as wide as the kernel's overhang past an image's
    // edge, so no output reads a neighbour; output column i * out_period + x is image i's column x
    // (period = stride * out_period), the rest are dropped. Why: oneDNN 3.2's convolutions block an
    // image's output pixels row by row, so at 7x7 each block held 7 pixels (AMX tiles take 16):
    // 16 images side by side ran a bf16 3x3 512-channel layer at 7x7 in 1.63 ms against 1.81, int8
    // 0.54 against 0.88 ms, 4 images 0.31 against 0.54 (copies included). Whether it is faster is
    // measured per layer and input shape in the model (backends/cpu/kernels/_onednn_direct_conv.py).
    struct SideBySide {
        int64_t gap, period, out_period, width, out_width;  // width, out_width: the packed image's
    };
    SideBySide side_by_side(int64_t n, int64_t w) const;

    // (oh, ow) for an input of (h, w); throws when the input cannot hold the kernel.
    std::pair<int64_t, int64_t> output_size(int64_t h, int64_t w) const;

    // The oneDNN implementation the primitive for this input size uses (e.g. brg_conv_fwd:avx512_core_amx).
    std::string implementation(int64_t n, int64_t h, int64_t w);

    const ConvConfig& config() const { return config_; }

    // How many input sizes have a primitive now (at most PlanCache::kMaxPlans).
    size_t plan_count() { return plans_.size(); }

  private:
    std::shared_ptr<LayerPlan> plan_for(int64_t n, int64_t h, int64_t w);
    LayerPlan make_plan(int64_t n, int64_t h, int64_t w);
    LayerPlan make_matmul_plan(int64_t rows);  // [rows, kh*kw*in] x [kh*kw*in, out]
    void run_side_by_side(const void* src, int64_t n, int64_t h, int64_t w, void* dst, int64_t oh, int64_t ow);
    dnnl::primitive_attr attributes(int weight_mask) const;  // scales, zero points and post-ops

    ConvConfig config_;
    PackedWeights weights_;
    dnnl::memory bias_, bias_row_;  // [out] for the convolution, the same values as [1, out] for the matmul
    Int8Params int8_;
    PlanCache<LayerPlan> plans_;  // per input (n, 0, h, w)
};


}  // namespace ipxc_dnnl
