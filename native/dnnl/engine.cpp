// What every direct oneDNN layer shares: the engine, a stream and a scratchpad per thread, the ISA cap.
#include "engine.h"

#include <map>
#include <stdexcept>
#include <vector>

namespace ipxc_dnnl {

dnnl::engine& cpu_engine() {
    static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    return engine;
}

dnnl::stream& thread_stream() {
    thread_local dnnl::stream stream(cpu_engine());
    return stream;
}

// One scratchpad buffer per thread, grown to the largest a primitive asked for: primitives
// never run concurrently on one thread, and several threads may run one layer at once.
void* thread_scratch(size_t bytes) {
    thread_local std::vector<unsigned char> buffer;
    if (buffer.size() < bytes) buffer.resize(bytes);
    return buffer.data();
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
