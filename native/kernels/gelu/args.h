// The argument struct(s) of the gelu kernel(s) (see native/include/ipxc/kernels.h).
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"

namespace ipxc {

struct GeluArgs {
    const void* x = nullptr;
    void* y = nullptr;
    int64_t n = 0;
    bool tanh = false;  // tanh approximation instead of erf
    DType dtype = DType::f32;
    int threads = 1;
};

}  // namespace ipxc
