// What every direct oneDNN layer shares: the engine, a stream and a scratchpad per thread, the ISA cap.
#include "engine.h"

#include <atomic>
#include <cstring>
#include <map>
#include <stdexcept>
#include <vector>

namespace ipxc_dnnl {

dnnl::engine& cpu_engine() {
    static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    return engine;
}

uint64_t next_plan_id() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}

dnnl::stream& thread_stream() {
    thread_local dnnl::stream stream(cpu_engine());
    return stream;
}

// Per-thread buffers, each grown to the largest size asked for: primitives never run
// concurrently on one thread, and several threads may run one layer at once.
void* thread_buffer(ThreadBuffer which, size_t bytes) {
    thread_local std::vector<unsigned char> buffers[4];
    std::vector<unsigned char>& buffer = buffers[static_cast<int>(which)];
    if (buffer.size() < bytes) buffer.resize(bytes);
    return buffer.data();
}

size_t element_size(dnnl::memory::data_type type) {
    using dt = dnnl::memory::data_type;
    switch (type) {
        case dt::u8: case dt::s8: return 1;
        case dt::bf16: return 2;
        case dt::f32: case dt::s32: return 4;
        default: throw std::invalid_argument("unsupported oneDNN data type");
    }
}

dnnl::memory scalar(dnnl::memory::data_type type, const void* value) {
    dnnl::memory m({{1}, type, dnnl::memory::format_tag::x}, cpu_engine());
    std::memcpy(m.get_data_handle(), value, element_size(type));
    return m;
}

dnnl::memory f32_memory(const float* data, const dnnl::memory::dims& dims) {
    using tag = dnnl::memory::format_tag;
    dnnl::memory m({dims, dnnl::memory::data_type::f32, dims.size() == 1 ? tag::x : tag::ab}, cpu_engine());
    std::memcpy(m.get_data_handle(), data, m.get_desc().get_size());
    return m;
}

bool set_max_isa(const std::string& isa) {
    static const std::map<std::string, dnnl::cpu_isa> levels{
        {"avx2", dnnl::cpu_isa::avx2},
        {"avx512_core", dnnl::cpu_isa::avx512_core},
        {"avx512_core_vnni", dnnl::cpu_isa::avx512_core_vnni},
        {"avx512_core_bf16", dnnl::cpu_isa::avx512_core_bf16},
        {"avx512_core_amx", dnnl::cpu_isa::avx512_core_amx},
    };
    auto found = levels.find(isa);
    if (found == levels.end()) throw std::invalid_argument("unknown oneDNN ISA " + isa);
    try {
        dnnl::set_max_cpu_isa(found->second);
        return true;
    } catch (const dnnl::error&) {  // too late: a primitive already ran
        return false;
    }
}

}  // namespace ipxc_dnnl
