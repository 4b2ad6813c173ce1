// The dispatch table: for each kernel, the implementation per ISA level.
#pragma once

#include <vector>

#include "ipxc/isa.h"
#include "ipxc/kernels.h"

namespace ipxc {

// The implementation for `want`, or for the highest lower level that has one; `used` (optional)
// receives the level it was compiled for. Null if the kernel has no implementation at all.
#define IPXC_DECLARE_LOOKUP(name, Args) name##_fn lookup_##name(Level want, Level* used = nullptr);
IPXC_KERNELS(IPXC_DECLARE_LOOKUP)
#undef IPXC_DECLARE_LOOKUP

// Kernel names, and the levels each one was compiled for.
std::vector<const char*> kernel_names();
std::vector<Level> kernel_levels(const char* name);  // empty for an unknown name

}  // namespace ipxc
