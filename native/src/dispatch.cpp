// The dispatch table (compiled for the generic level).
//
// Each kernel source is compiled once per level into namespace ipxc::<level> and defines
// <level>::<name>_entry there (IPXC_REGISTER_KERNEL). Here every (level, kernel) entry is
// declared weak: a level a kernel was not compiled for links as a null address, and lookup
// falls back to the highest lower level that has one.
#include "ipxc/dispatch.h"

#include <cstring>

#define IPXC_WEAK_ENTRY(name, Args) extern const ::ipxc::name##_fn name##_entry __attribute__((weak, visibility("hidden")));
// One line per level, in the order of ipxc::Level.
namespace ipxc { namespace generic { IPXC_KERNELS(IPXC_WEAK_ENTRY) } }
namespace ipxc { namespace avx2 { IPXC_KERNELS(IPXC_WEAK_ENTRY) } }
namespace ipxc { namespace avx512 { IPXC_KERNELS(IPXC_WEAK_ENTRY) } }
namespace ipxc { namespace avx512_vnni { IPXC_KERNELS(IPXC_WEAK_ENTRY) } }
namespace ipxc { namespace avx512_bf16 { IPXC_KERNELS(IPXC_WEAK_ENTRY) } }
namespace ipxc { namespace amx { IPXC_KERNELS(IPXC_WEAK_ENTRY) } }
#undef IPXC_WEAK_ENTRY

namespace ipxc {

namespace {

// Per kernel: the address of each level's entry (null where not compiled), indexed by Level.
#define IPXC_ENTRIES(name)                                                                    \
    {&generic::name##_entry, &avx2::name##_entry, &avx512::name##_entry,                      \
     &avx512_vnni::name##_entry, &avx512_bf16::name##_entry, &amx::name##_entry}

template <class Fn>
Fn pick(const Fn* const (&entries)[kNumLevels], Level want, Level* used) {
    for (int i = static_cast<int>(want); i >= 0; --i) {
        if (entries[i] != nullptr) {
            if (used) *used = static_cast<Level>(i);
            return *entries[i];
        }
    }
    return nullptr;
}

struct KernelInfo {
    const char* name;
    const void* entries[kNumLevels];
};

#define IPXC_INFO(name, Args) {#name, IPXC_ENTRIES(name)},
const KernelInfo kKernels[] = {IPXC_KERNELS(IPXC_INFO)};
#undef IPXC_INFO

}  // namespace

#define IPXC_DEFINE_LOOKUP(name, Args)                                 \
    name##_fn lookup_##name(Level want, Level* used) {                 \
        static const name##_fn* const entries[kNumLevels] = IPXC_ENTRIES(name); \
        return pick(entries, want, used);                              \
    }
IPXC_KERNELS(IPXC_DEFINE_LOOKUP)
#undef IPXC_DEFINE_LOOKUP

std::vector<const char*> kernel_names() {
    std::vector<const char*> names;
    for (const KernelInfo& k : kKernels) names.push_back(k.name);
    return names;
}

std::vector<Level> kernel_levels(const char* name) {
    std::vector<Level> levels;
    for (const KernelInfo& k : kKernels) {
        if (std::strcmp(k.name, name) != 0) continue;
        for (int i = 0; i < kNumLevels; ++i)
            if (k.entries[i] != nullptr) levels.push_back(static_cast<Level>(i));
    }
    return levels;
}

}  // namespace ipxc
