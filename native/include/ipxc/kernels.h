// Kernel signatures, the kernel list and the registration macro.
//
// Every kernel takes one argument struct of raw pointers and sizes, so the library never
// needs torch's headers: the binding fills the struct from DLPack tensors.
#pragma once

#include <cstdint>

namespace ipxc {

enum class DType : int { f32 = 0, bf16 = 1 };  // bf16 is stored as uint16 bits

// layer_norm and rms_norm over the last `cols` elements of each row:
//   v = x (+ residual); y = norm(v) * gamma (+ beta).
struct NormArgs {
    const void* x = nullptr;
    const void* residual = nullptr;  // optional, same dtype and shape as x
    void* y = nullptr;
    void* sum = nullptr;             // optional: receives x + residual (rounded to dtype)
    const float* gamma = nullptr;    // optional, cols floats
    const float* beta = nullptr;     // optional, cols floats (layer_norm only)
    int64_t rows = 0, cols = 0;
    float eps = 1e-5f;
    DType dtype = DType::f32;
    int threads = 1;
    // layer_norm only, optional: y quantized as well, of y's values in dtype, int8 or uint8. As
    // the quantize kernel would: clamp(nearbyint(fmaf(y, 1 / q_scale, q_zero_point))); with
    // q_multipliers (cols floats, SmoothQuant) as quantize_last_axis would:
    // clamp(nearbyint(y * q_multipliers[c]) + q_zero_point).
    void* q = nullptr;
    bool q_unsigned = true;
    float q_scale = 1.0f;
    int32_t q_zero_point = 0;
    const float* q_multipliers = nullptr;
};

// softmax over the last dim of x * scale + mask.
constexpr int kMaxMaskDims = 8;
struct SoftmaxArgs {
    const void* x = nullptr;
    void* y = nullptr;
    int64_t rows = 0, cols = 0;
    float scale = 1.0f;
    DType dtype = DType::f32;
    // Optional additive mask with a contiguous last dim of `cols` elements. Row r of x has
    // leading index (i0, ..., i_{k-1}) over lead_shape; its mask row starts at
    // sum(i_d * mask_strides[d]) elements (stride 0 broadcasts that dim).
    const void* mask = nullptr;
    DType mask_dtype = DType::f32;
    int lead_ndim = 0;
    int64_t lead_shape[kMaxMaskDims] = {};
    int64_t mask_strides[kMaxMaskDims] = {};
    int threads = 1;
};

// Element-wise kernels over n contiguous elements.
struct UnaryArgs {
    const void* x = nullptr;
    void* y = nullptr;
    int64_t n = 0;
    DType dtype = DType::f32;
    int threads = 1;
};
struct GeluArgs {
    const void* x = nullptr;
    void* y = nullptr;
    int64_t n = 0;
    bool tanh = false;  // tanh approximation instead of erf
    DType dtype = DType::f32;
    int threads = 1;
};
struct BinaryArgs {  // y = f(a, b)
    const void* a = nullptr;
    const void* b = nullptr;
    void* y = nullptr;
    int64_t n = 0;
    DType dtype = DType::f32;
    int threads = 1;
};

// ---- INT8 ----------------------------------------------------------------------------------------
// Quantized values are int8 or uint8 (`out_unsigned` / `in_unsigned`); rounding is half to
// even (as torch's nearbyint), results saturate to the type's range.
//
// quantize/dequantize see the tensor as [rows, cols]. Per tensor: one scale and zero point
// (rows may be anything). Per channel: channel = row, i.e. axis 0 of the tensor with the other
// dims flattened into cols (torch.quantize_per_channel(..., axis=0)).
struct QuantizeArgs {  // y = clamp(nearbyint(x * (1 / scale)) + zero_point)
    const void* x = nullptr;         // f32 or bf16
    void* y = nullptr;               // int8 or uint8
    int64_t rows = 0, cols = 0;
    const float* scales = nullptr;   // 1 or rows
    const int32_t* zero_points = nullptr;
    bool per_channel = false;
    bool out_unsigned = false;
    DType dtype = DType::f32;
    int threads = 1;
};
struct DequantizeArgs {  // y = (q - zero_point) * scale
    const void* q = nullptr;         // int8 or uint8
    void* y = nullptr;               // f32 or bf16
    int64_t rows = 0, cols = 0;
    const float* scales = nullptr;
    const int32_t* zero_points = nullptr;
    bool per_channel = false;
    bool in_unsigned = false;
    DType dtype = DType::f32;
    int threads = 1;
};
// The int8 GEMM epilogue on an int32 accumulator [rows, cols]; channel = column (the last
// axis: GEMM output channels). y = clamp(nearbyint((acc + bias[c]) * multiplier[c]) + zero_point)
struct RequantizeArgs {
    const int32_t* acc = nullptr;
    void* y = nullptr;                    // int8 or uint8
    int64_t rows = 0, cols = 0;
    const float* multipliers = nullptr;   // cols, or 1 when !per_channel
    const int32_t* bias = nullptr;        // optional, cols
    bool per_channel = true;
    int32_t zero_point = 0;
    bool out_unsigned = false;
    int threads = 1;
};
// Activation quantize with one multiplier per channel of the LAST axis (SmoothQuant smoothing
// folded in), x seen as [rows, cols], channel = column:
//   y = clamp(nearbyint(x * inv_scales[c]) + zero_point)   (product rounded to float first)
struct QuantizeLastAxisArgs {
    const void* x = nullptr;              // f32 or bf16
    void* y = nullptr;                    // int8 or uint8
    int64_t rows = 0, cols = 0;
    const float* inv_scales = nullptr;    // cols
    int32_t zero_point = 0;
    bool out_unsigned = false;
    DType dtype = DType::f32;
    int threads = 1;
};
// int8_gemm: an exact uint8 x int8 GEMM for CPUs without VNNI, whose vpmaddubsw pair sums
// saturate (oneDNN's u8*s8 path there: off by ~0.2 relative). Activations minus their zero
// point and the weights are widened to int16 and multiplied with vpmaddwd into int32: exact
// for any codes while k < 2^16. Then, per output column n,
//   v = float(acc) * scales[n] + bias[n]      (scales[n] = x_scale * w_scale[n], folded by the caller)
//   v = max(v, 0) if relu
// written as float32, as bf16 (round to nearest even), or as uint8/int8 codes
// clamp(nearbyint(fmaf(v, out_inv_scale, out_zero_point))).
// `w` is packed by the caller (ipexconvert.native.pack_int8_weight): int16 [n16 / 16][k2 / 2][16][2]
// with n16 = n rounded up to 16 and k2 = k rounded up to 2, zero padded: for each pair of k and
// each block of 16 outputs, the 16 outputs' two weights side by side (one vpmaddwd operand pair).
enum class GemmOut : int { f32 = 0, bf16 = 1, u8 = 2, s8 = 3 };
struct Int8GemmArgs {
    const uint8_t* a = nullptr;      // [m, k], row r at a + r * a_stride
    int64_t a_stride = 0;
    int32_t a_zero_point = 0;
    const int16_t* w = nullptr;      // packed, see above
    int64_t m = 0, n = 0, k = 0;
    const float* scales = nullptr;   // n
    const float* bias = nullptr;     // optional, n
    bool relu = false;
    void* y = nullptr;               // [m, n], row r at y + r * y_stride elements
    int64_t y_stride = 0;
    GemmOut out = GemmOut::f32;
    float out_inv_scale = 1.0f;
    int32_t out_zero_point = 0;
    int threads = 1;
    // Optional: a residual added after scale and bias, before relu: v += (r - r_zero_point) * r_scale
    // for uint8 r, v += r for float32 r; [m, n], row r at residual + r * residual_stride elements.
    const void* residual = nullptr;
    bool residual_u8 = false;
    int64_t residual_stride = 0;
    float residual_scale = 1.0f;
    int32_t residual_zero_point = 0;
    // Optional: the rows of `a` are a convolution's patches, gathered while widening (no im2col
    // buffer): a is a dense NHWC uint8 image [batch, in_h, in_w, channels], row r is output pixel
    // (b, oh, ow) and k runs over (kh, kw, channel); taps outside the image read the zero point
    // (they add nothing). m = batch * out_h * out_w, k = kh * kw * channels.
    bool conv = false;
    int64_t in_h = 0, in_w = 0, channels = 0, out_h = 0, out_w = 0;
    int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
};

// y[i, :] = weight[indices[i], :]. The kernel checks every index first; if one is outside
// [0, vocab) it copies nothing and sets *bad_position to its position (else -1).
// to_channels_last: x [batch, channels, pixels] (NCHW, H * W flattened) written as y [batch,
// pixels, channels] (NHWC) and converted on the way: to float32 or bf16 (round to nearest even),
// or, with `quantized`, to int8/uint8 per tensor with quantize's arithmetic.
struct ChannelsLastArgs {
    const void* x = nullptr;  // f32 or bf16
    void* y = nullptr;        // out_dtype, or int8/uint8 when quantized
    int64_t batch = 0, channels = 0, pixels = 0;
    DType dtype = DType::f32;
    DType out_dtype = DType::f32;
    bool quantized = false, out_unsigned = false;
    float scale = 1.0f;
    int32_t zero_point = 0;
    int threads = 1;
};
// spatial_mean: the mean over H and W of x [N, C, H, W] (global average pooling) into y [N, C],
// summed in fp32. x is NCHW-contiguous, or with `channels_last` its NHWC view [N, H, W, C].
struct SpatialMeanArgs {
    const void* x = nullptr;  // f32 or bf16
    void* y = nullptr;        // x's dtype
    int64_t batch = 0, channels = 0, pixels = 0;
    bool channels_last = false;
    DType dtype = DType::f32;
    int threads = 1;
};
// concat_channels: out = cat([a, b], channels) for 4-D [N, C, H, W] a and b whose channels are
// contiguous (stride 1; the other dims any stride, so b may be a strided subsample), into a
// channels-last out [N, Ca + Cb, H, W]. Any element type (itemsize bytes): values are copied.
struct ConcatChannelsArgs {
    const void* src[2] = {nullptr, nullptr};
    int64_t channels[2] = {0, 0};
    int64_t strides[2][3] = {{0, 0, 0}, {0, 0, 0}};  // per input: N, H, W strides in elements
    void* out = nullptr;
    int64_t batch = 0, height = 0, width = 0, itemsize = 1;
    int threads = 1;
};
struct EmbeddingArgs {
    const void* weight = nullptr;    // [vocab, dim], f32 or bf16
    const void* indices = nullptr;   // n, int64 or int32
    bool indices_i32 = false;
    void* y = nullptr;               // [n, dim]
    int64_t n = 0, vocab = 0, dim = 0;
    DType dtype = DType::f32;
    int64_t* bad_position = nullptr;
    int threads = 1;
};

// Attention softmax(q k^T * scale + mask) v over [batch, heads, seq, head_dim] tensors whose
// last dim is contiguous; the other dims may have any element strides (strides[0..2] = batch,
// head, seq), so q/k/v can be views into one packed QKV projection and out a view into a
// [batch, seq, heads, head_dim] buffer. `attention`: bf16, head_dim a multiple of 32, built for
// avx512_bf16 and amx. `attention_f32`: fp32, head_dim a multiple of 16, built for avx512, never
// quantized.
struct AttentionArgs {
    const void* q = nullptr;
    const void* k = nullptr;
    const void* v = nullptr;
    void* out = nullptr;
    int64_t batch = 0, heads = 0, q_len = 0, kv_len = 0, head_dim = 0;
    int64_t q_strides[3] = {}, k_strides[3] = {}, v_strides[3] = {}, out_strides[3] = {};
    float scale = 1.0f;
    // Optional additive mask [batch, heads, q_len, kv_len] with a contiguous last dim; stride 0
    // broadcasts a dim.
    const void* mask = nullptr;
    DType mask_dtype = DType::f32;
    int64_t mask_strides[3] = {};
    int threads = 1;
    // Optional: out holds int8/uint8 codes instead of bf16, of the bf16-rounded output values,
    // quantized as NormArgs' q is (per tensor with q_scale, or with q_multipliers: heads *
    // head_dim floats, index h * head_dim + d, i.e. along the last axis of out viewed as
    // [batch, q_len, heads * head_dim]).
    bool quantized = false;
    bool q_unsigned = true;
    float q_scale = 1.0f;
    int32_t q_zero_point = 0;
    const float* q_multipliers = nullptr;
};

// The kernel list: X(name, argument struct). Adding a kernel = one line here, one source file
// under native/kernels/ and one ipxc_kernel() line in CMakeLists.txt.
#define IPXC_KERNELS(X)                         \
    X(layer_norm, NormArgs)                     \
    X(rms_norm, NormArgs)                       \
    X(softmax, SoftmaxArgs)                     \
    X(gelu, GeluArgs)                           \
    X(silu, UnaryArgs)                          \
    X(silu_mul, BinaryArgs)                     \
    X(quantize, QuantizeArgs)                   \
    X(dequantize, DequantizeArgs)               \
    X(requantize, RequantizeArgs)               \
    X(quantize_last_axis, QuantizeLastAxisArgs) \
    X(embedding, EmbeddingArgs)                 \
    X(attention, AttentionArgs)                 \
    X(attention_f32, AttentionArgs)             \
    X(to_channels_last, ChannelsLastArgs)       \
    X(spatial_mean, SpatialMeanArgs)            \
    X(concat_channels, ConcatChannelsArgs)      \
    X(int8_gemm, Int8GemmArgs)

#define IPXC_DECLARE_FN(name, Args) using name##_fn = void (*)(const Args&);
IPXC_KERNELS(IPXC_DECLARE_FN)
#undef IPXC_DECLARE_FN

}  // namespace ipxc

// Registers `fn` as kernel `name` for the level this file is being compiled for. Use it at
// namespace scope inside ipxc::IPXC_NS. It defines ipxc::<level>::<name>_entry, a constant
// function pointer (constant-initialised: no code runs at load time, which matters because
// this object file may contain instructions the CPU lacks). The dispatcher, compiled for the
// generic level, refers to every <level>::<name>_entry weakly; missing ones are null.
#define IPXC_REGISTER_KERNEL(name, fn)          \
    extern const ::ipxc::name##_fn name##_entry; \
    const ::ipxc::name##_fn name##_entry = &fn
