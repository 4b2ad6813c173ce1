// ipexconvert._native: Python bindings (nanobind). Compiled for the generic level.
//
// Tensors arrive through DLPack (tensor_arg.h), so the module has no torch dependency at build
// time and one build serves any torch version. Outputs are allocated by the caller and passed
// in. The GIL is released while a kernel runs. Each kernel's binding lives in its folder
// (native/kernels/<folder>/bind.cpp); this file binds detection and the kernel table and calls them.
#include "bind_common.h"
#include "ipxc/kernel_bindings.h"
#include "ipxc/parallel.h"

namespace ipxc {

#define IPXC_DECLARE_BIND(folder) void bind_##folder(nb::module_& m);
IPXC_BINDINGS(IPXC_DECLARE_BIND)
#undef IPXC_DECLARE_BIND
void bind_capture(nb::module_& m);  // python/capture.cpp

namespace {

// The level kernel `name` runs at under max_isa (None: IPEXCONVERT_MAX_ISA, else the best), or
// "none" when it has no build at or below that level (attention has none below avx512_bf16).
std::string kernel_level(const std::string& name, const OptStr& max_isa) {
    bool known = false;
    for (const char* k : kernel_names()) known = known || name == k;
    if (!known) fail("no native kernel named '" + name + "'");
    const std::vector<Level> built = kernel_levels(name.c_str());  // empty: a compiler without its level's flags
    const Level want = select(max_isa);
    std::string used = "none";
    for (Level l : built)
        if (static_cast<int>(l) <= static_cast<int>(want)) used = level_name(l);
    return used;
}

nb::dict cpu_features_dict() {
    const CpuFeatures& f = cpu_features();
    nb::dict d;
    d["avx"] = f.avx; d["avx2"] = f.avx2; d["fma"] = f.fma; d["f16c"] = f.f16c;
    d["avx512f"] = f.avx512f; d["avx512bw"] = f.avx512bw; d["avx512dq"] = f.avx512dq; d["avx512vl"] = f.avx512vl;
    d["avx512_vnni"] = f.avx512_vnni; d["avx512_bf16"] = f.avx512_bf16;
    d["amx_tile"] = f.amx_tile; d["amx_bf16"] = f.amx_bf16; d["amx_int8"] = f.amx_int8;
    d["xcr0"] = f.xcr0; d["os_ymm"] = f.os_ymm; d["os_zmm"] = f.os_zmm; d["os_tiles"] = f.os_tiles;
    d["amx_permission"] = f.amx_permission; d["intel"] = f.intel;
    return d;
}

}  // namespace
}  // namespace ipxc

NB_MODULE(_native, m) {
    using namespace ipxc;
    m.doc() = "ipexconvert native kernels with ISA dispatch; the runtime kernels (ipexconvert/backends/cpu/kernels/) and the test harness (tests/native/native_ops.py) call these";

    m.def("levels", [] {
        std::vector<std::string> out;
        for (int i = 0; i < kNumLevels; ++i) out.push_back(level_name(static_cast<Level>(i)));
        return out;
    }, "All ISA levels, lowest first.");
    m.def("supported_levels", [] { return names_of(supported_levels()); },
          "The levels this CPU and OS can run (CPUID + XCR0 + AMX permission), lowest first.");
    m.def("selected_level", [](const OptStr& max_isa) { return std::string(level_name(select(max_isa))); },
          "max_isa"_a = nb::none(), "min(best supported, max_isa or else IPEXCONVERT_MAX_ISA).");
    m.def("cpu_features", &cpu_features_dict, "CPUID/XCR0 feature bits and the AMX permission.");
    m.def("kernel_names", [] {
        std::vector<std::string> out;
        for (const char* n : kernel_names()) out.push_back(n);
        return out;
    });
    m.def("kernel_levels", [](const std::string& name) { return names_of(kernel_levels(name.c_str())); }, "name"_a,
          "The levels a kernel was compiled for.");
    m.def("kernel_level", &kernel_level, "name"_a, "max_isa"_a = nb::none(),
          "The level kernel `name` runs at under max_isa.");
    m.def("team_thread_ids", &team_thread_ids, "threads"_a,
          "Kernel thread ids of the calling thread's OpenMP team of `threads` (index 0: the caller).");

    // Kernels (one binding per native/kernels/<folder>/): out (and sum_out) are preallocated like x;
    // optional tensors may be None.
#define IPXC_CALL_BIND(folder) bind_##folder(m);
    IPXC_BINDINGS(IPXC_CALL_BIND)
#undef IPXC_CALL_BIND
    bind_capture(m);
}
