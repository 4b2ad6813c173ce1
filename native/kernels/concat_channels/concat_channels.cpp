// concat_channels: two [N, C, H, W] tensors joined along the channels into a channels-last output.
// merge_shortcut_conv feeds a ResNet block's last 1x1 conv the block's main-path activation and
// its strided-subsampled input side by side; each output pixel is the two inputs' channel runs
// copied one after the other. Each input's channels are contiguous, its pixels anywhere (the
// subsample is a strided view of the block input, never copied first).
#include "common.h"

namespace ipxc {
namespace IPXC_NS {
namespace {

void concat_rows(const ConcatChannelsArgs& a, int64_t begin, int64_t end) {
    const int64_t size = a.itemsize, first = a.channels[0] * size, second = a.channels[1] * size;
    const int64_t pixel = first + second;
    const char* src0 = static_cast<const char*>(a.src[0]);
    const char* src1 = static_cast<const char*>(a.src[1]);
    char* out = static_cast<char*>(a.out);
    for (int64_t row = begin; row < end; ++row) {  // row = n * height + h
        const int64_t n = row / a.height, h = row % a.height;
        const char* p0 = src0 + (n * a.strides[0][0] + h * a.strides[0][1]) * size;
        const char* p1 = src1 + (n * a.strides[1][0] + h * a.strides[1][1]) * size;
        char* o = out + row * a.width * pixel;
        for (int64_t w = 0; w < a.width; ++w, o += pixel) {
            std::memcpy(o, p0 + w * a.strides[0][2] * size, first);
            std::memcpy(o + first, p1 + w * a.strides[1][2] * size, second);
        }
    }
}

void concat_channels(const ConcatChannelsArgs& a) {
    parallel(a.batch * a.height, row_grain(a.width * (a.channels[0] + a.channels[1])), a.threads,
             [&](int64_t begin, int64_t end) { concat_rows(a, begin, end); });
}

}  // namespace

IPXC_REGISTER_KERNEL(concat_channels, concat_channels);

}  // namespace IPXC_NS
}  // namespace ipxc
