// What every direct oneDNN layer shares (engine.cpp).
#pragma once

#include <dnnl.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

#include "checks.h"  // out_size and the argument checks

namespace ipxc_dnnl {

dnnl::engine& cpu_engine();
// A new number on every call (from 1): identifies a layer plan for the life of the process.
uint64_t next_plan_id();
// A stream per thread: primitives never run concurrently on one thread.
dnnl::stream& thread_stream();
// A per-thread buffer of at least `bytes`: the primitive's scratchpad, a conv's im2col rows, or the
// images side by side of a conv's input and output (each in use while the scratchpad is, hence
// buffers of their own).
enum class ThreadBuffer { kScratchpad = 0, kIm2col = 1, kSideBySideIn = 2, kSideBySideOut = 3 };
void* thread_buffer(ThreadBuffer which, size_t bytes);

size_t element_size(dnnl::memory::data_type type);
// A one-element oneDNN memory holding *value (a scale or zero point passed at run time).
dnnl::memory scalar(dnnl::memory::data_type type, const void* value);

// Float32 values (a bias or per-channel scales) copied into oneDNN memory of these dims (1-D or 2-D, plain).
dnnl::memory f32_memory(const float* data, const dnnl::memory::dims& dims);

// Caps oneDNN's instruction set ("avx2", "avx512_core", "avx512_core_vnni", "avx512_core_bf16",
// "avx512_core_amx"); only effective before the first primitive is created. Returns success.
bool set_max_isa(const std::string& isa);

}  // namespace ipxc_dnnl
