// What every direct oneDNN layer shares (engine.cpp).
#pragma once

#include <dnnl.hpp>

#include <cstddef>
#include <string>

namespace ipxc_dnnl {

dnnl::engine& cpu_engine();
// A stream per thread: primitives never run concurrently on one thread.
dnnl::stream& thread_stream();
// A scratchpad of at least `bytes` per thread, grown to the largest a primitive asked for.
void* thread_scratch(size_t bytes);

// Caps oneDNN's instruction set ("avx2", "avx512_core", "avx512_core_vnni", "avx512_core_bf16",
// "avx512_core_amx"); only effective before the first primitive is created. Returns success.
bool set_max_isa(const std::string& isa);

}  // namespace ipxc_dnnl
