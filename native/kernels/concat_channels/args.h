// The argument struct(s) of the concat_channels kernel(s) (see native/include/ipxc/kernels.h).
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"

namespace ipxc {

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

}  // namespace ipxc
