// ISA levels and CPU/OS feature detection.
//
// Levels are ordered: a CPU that supports a level supports every level below it. Detection
// runs CPUID and XGETBV (the OS must save the register state a level uses) and, for AMX, asks
// Linux for tile-data permission. This file is compiled for the generic level only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ipxc {

// The enumerator names double as the per-level namespace names (ipxc::avx512, ...).
enum class Level : int { generic = 0, avx2, avx512, avx512_vnni, avx512_bf16, amx };
constexpr int kNumLevels = 6;

const char* level_name(Level level);
// Parses a level name (case-insensitive, surrounding spaces ignored); false when unknown.
bool parse_level(const std::string& text, Level* out);
std::string level_names_joined();  // "generic, avx2, ..." for error messages

struct CpuFeatures {
    // CPUID bits.
    bool avx = false, avx2 = false, fma = false, f16c = false;
    bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
    bool avx512_vnni = false, avx512_bf16 = false;
    bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
    // OS support: XCR0 bits (the kernel saves these registers on context switch).
    uint64_t xcr0 = 0;
    bool os_ymm = false, os_zmm = false, os_tiles = false;
    // Linux granted AMX tile-data use to this process (arch_prctl).
    bool amx_permission = false;
    // CPUID leaf 0's vendor is "GenuineIntel" (kernels whose best memory access pattern differs by vendor).
    bool intel = false;
};

// Detected once per process (the AMX permission request happens here, also once).
const CpuFeatures& cpu_features();

// Levels this CPU and OS can run, lowest first; always starts with generic.
std::vector<Level> supported_levels();
Level best_level();

// min(best_level(), cap). cap == nullptr or "" means: read IPEXCONVERT_MAX_ISA (unset = no cap).
// Throws std::invalid_argument naming the bad value and the valid ones.
Level select_level(const char* cap);

}  // namespace ipxc
