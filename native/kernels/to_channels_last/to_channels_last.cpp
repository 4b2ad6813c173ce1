// to_channels_last: NCHW -> NHWC with a conversion on the way (float32, bf16, or int8/uint8 per
// tensor; see ChannelsLastArgs). It is made for a network's input: [N, 3, H, W] float32 becoming
// the channels-last bf16 or uint8 tensor the first convolution reads, which torch makes in two or
// three passes (its channels-last copy of a 3-channel bf16 tensor alone took 5.8 ms at
// [16, 3, 224, 224] on 2 threads). Here a block of pixels is converted one channel at a time
// (contiguous reads, which vectorise) into a stack buffer, then interleaved into the output rows.
// Quantized codes use quantize.cpp's arithmetic (fmaf(x, 1/scale, zp), rounded half to even,
// clamped), so they equal the quantize kernel's codes of the same values. Asked to (nonfinite), it
// also says whether x held a NaN or an infinity, so the model need not read the input a second time.
#include <cfloat>

#include "quant.h"

namespace ipxc {
namespace IPXC_NS {
namespace {

constexpr int64_t kPixels = 64;    // pixels per block
constexpr int64_t kChannels = 64;  // channels per pass over a block: the buffer is kChannels x kPixels

// kC > 0: the channel count fixed at compile time (3: images), which lets the compiler vectorise
// the interleaving stores; 0: any count, a block of up to kChannels at a time.
template <int kC, class T, class O, class Convert>
void convert_block(const ChannelsLastArgs& a, int64_t n, int64_t p0, int64_t count, const Convert& convert) {
    const int64_t channels = kC > 0 ? kC : a.channels;
    const T* x = static_cast<const T*>(a.x) + n * channels * a.pixels + p0;
    O* __restrict y = static_cast<O*>(a.y) + (n * a.pixels + p0) * channels;
    O block[kChannels * kPixels];
    for (int64_t c0 = 0; c0 < channels; c0 += kChannels) {
        const int64_t nc = channels - c0 < kChannels ? channels - c0 : kChannels;
        for (int64_t c = 0; c < nc; ++c) {
            const T* __restrict src = x + (c0 + c) * a.pixels;
            O* __restrict dst = block + c * kPixels;
            if (a.nonfinite == nullptr) {
#pragma omp simd
                for (int64_t i = 0; i < count; ++i) dst[i] = convert(src[i]);
                continue;
            }
            int bad = 0;  // a compare per value on the way
#pragma omp simd reduction(| : bad)
            for (int64_t i = 0; i < count; ++i) {
                dst[i] = convert(src[i]);
                bad |= !(__builtin_fabsf(load(src[i])) <= FLT_MAX);  // NaN too
            }
            if (bad) __atomic_store_n(a.nonfinite, 1, __ATOMIC_RELAXED);
        }
        if constexpr (kC > 0) {
            for (int64_t i = 0; i < count; ++i)
                for (int64_t c = 0; c < kC; ++c) y[i * kC + c] = block[c * kPixels + i];
        } else {
            for (int64_t i = 0; i < count; ++i)
                for (int64_t c = 0; c < nc; ++c) y[i * channels + c0 + c] = block[c * kPixels + i];
        }
    }
}

template <class T, class O, class Convert>
void convert_pixels(const ChannelsLastArgs& a, int64_t n, int64_t p0, int64_t count, const Convert& convert) {
    if (a.channels == 3)
        convert_block<3, T, O>(a, n, p0, count, convert);
    else
        convert_block<0, T, O>(a, n, p0, count, convert);
}

template <class T>
void convert_range(const ChannelsLastArgs& a, int64_t n, int64_t p0, int64_t count) {
    if (a.quantized) {
        const float inv = 1.0f / a.scale, zp = static_cast<float>(a.zero_point);
        if (a.out_unsigned)
            convert_pixels<T, uint8_t>(a, n, p0, count, [=](T v) {
                return static_cast<uint8_t>(round_clamp(fma_f32(load(v), inv, zp), QRange<uint8_t>::lo, QRange<uint8_t>::hi));
            });
        else
            convert_pixels<T, int8_t>(a, n, p0, count, [=](T v) {
                return static_cast<int8_t>(round_clamp(fma_f32(load(v), inv, zp), QRange<int8_t>::lo, QRange<int8_t>::hi));
            });
    } else if (a.out_dtype == DType::f32) {
        convert_pixels<T, float>(a, n, p0, count, [](T v) { return load(v); });
    } else {
        convert_pixels<T, uint16_t>(a, n, p0, count, [](T v) { return f32_to_bf16(load(v)); });
    }
}

void to_channels_last(const ChannelsLastArgs& a) {
    if (a.batch <= 0 || a.channels <= 0 || a.pixels <= 0) return;
    parallel_blocks(a.batch, a.pixels, kPixels, kPixels * a.channels, a.threads, [&](int64_t n, int64_t p0, int64_t count) {
        if (a.dtype == DType::bf16)
            convert_range<uint16_t>(a, n, p0, count);
        else
            convert_range<float>(a, n, p0, count);
    });
}

}  // namespace

IPXC_REGISTER_KERNEL(to_channels_last, to_channels_last);

}  // namespace IPXC_NS
}  // namespace ipxc
