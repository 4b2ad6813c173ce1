// The argument struct(s) of the silu kernel(s) (see native/include/ipxc/kernels.h).
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"

namespace ipxc {

// Element-wise kernels over n contiguous elements.
struct UnaryArgs {
    const void* x = nullptr;
    void* y = nullptr;
    int64_t n = 0;
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

}  // namespace ipxc
