// CPU and OS feature detection (compiled for the generic level: plain x86-64).
#include "ipxc/isa.h"

#include <cctype>
#include <cstdlib>
#include <stdexcept>

#if defined(__x86_64__) || defined(__i386__)
#define IPXC_X86 1
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace ipxc {

namespace {

constexpr const char* kNames[kNumLevels] = {"generic", "avx2", "avx512", "avx512_vnni", "avx512_bf16", "amx"};

#if IPXC_X86
bool bit(unsigned reg, int n) { return (reg >> n) & 1u; }

// XGETBV through its mnemonic: the _xgetbv intrinsic would need -mxsave on this file.
uint64_t read_xcr0() {
    unsigned eax = 0, edx = 0;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return (uint64_t(edx) << 32) | eax;
}

// Linux keeps AMX tile data disabled until the process asks (kernel 5.16+).
bool request_amx_permission() {
#if defined(__linux__) && defined(SYS_arch_prctl)
    constexpr int kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
    unsigned long long granted = 0;
    if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &granted) != 0) return false;
    return (granted >> kXfeatureXtiledata) & 1ull;
#else
    return false;
#endif
}

CpuFeatures detect() {
    CpuFeatures f;
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return f;
    const unsigned max_leaf = eax;
    f.intel = ebx == 0x756e6547u && edx == 0x49656e69u && ecx == 0x6c65746eu;  // "Genu" "ineI" "ntel"

    bool osxsave = false;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
        f.fma = bit(ecx, 12);
        osxsave = bit(ecx, 27);
        f.avx = bit(ecx, 28);
        f.f16c = bit(ecx, 29);
    }
    if (max_leaf >= 7) {
        __cpuid_count(7, 0, eax, ebx, ecx, edx);
        const unsigned max_subleaf = eax;
        f.avx2 = bit(ebx, 5);
        f.avx512f = bit(ebx, 16);
        f.avx512dq = bit(ebx, 17);
        f.avx512bw = bit(ebx, 30);
        f.avx512vl = bit(ebx, 31);
        f.avx512_vnni = bit(ecx, 11);
        f.amx_bf16 = bit(edx, 22);
        f.amx_tile = bit(edx, 24);
        f.amx_int8 = bit(edx, 25);
        if (max_subleaf >= 1) {
            __cpuid_count(7, 1, eax, ebx, ecx, edx);
            f.avx512_bf16 = bit(eax, 5);
        }
    }
    if (osxsave) {
        f.xcr0 = read_xcr0();
        f.os_ymm = (f.xcr0 & 0x6) == 0x6;            // SSE + AVX state
        f.os_zmm = f.os_ymm && (f.xcr0 & 0xE0) == 0xE0;  // opmask, ZMM0-15 upper halves, ZMM16-31
        f.os_tiles = (f.xcr0 & 0x60000) == 0x60000;  // XTILECFG + XTILEDATA
    }
    if (f.amx_tile && f.os_tiles) f.amx_permission = request_amx_permission();
    return f;
}
#else
CpuFeatures detect() { return CpuFeatures{}; }
#endif

}  // namespace

const char* level_name(Level level) { return kNames[static_cast<int>(level)]; }

bool parse_level(const std::string& text, Level* out) {
    size_t b = 0, e = text.size();
    while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
    std::string s;
    for (size_t i = b; i < e; ++i) s += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
    for (int i = 0; i < kNumLevels; ++i) {
        if (s == kNames[i]) {
            *out = static_cast<Level>(i);
            return true;
        }
    }
    return false;
}

std::string level_names_joined() {
    std::string s;
    for (int i = 0; i < kNumLevels; ++i) s += (i ? ", " : "") + std::string(kNames[i]);
    return s;
}

const CpuFeatures& cpu_features() {
    static const CpuFeatures features = detect();  // thread-safe, once
    return features;
}

std::vector<Level> supported_levels() {
    const CpuFeatures& f = cpu_features();
    // What each level needs on top of the one below it; the first miss ends the list.
    const bool needs[kNumLevels] = {
        true,
        f.avx && f.avx2 && f.fma && f.f16c && f.os_ymm,
        f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl && f.os_zmm,
        f.avx512_vnni,
        f.avx512_bf16,
        f.amx_tile && f.amx_bf16 && f.amx_int8 && f.os_tiles && f.amx_permission,
    };
    std::vector<Level> levels;
    for (int i = 0; i < kNumLevels && needs[i]; ++i) levels.push_back(static_cast<Level>(i));
    return levels;
}

Level best_level() { return supported_levels().back(); }

Level select_level(const char* cap) {
    std::string text;
    const char* source = "the ISA cap";
    if (cap != nullptr && *cap != '\0') {
        text = cap;
    } else if (const char* env = std::getenv("IPEXCONVERT_MAX_ISA")) {
        text = env;
        source = "IPEXCONVERT_MAX_ISA";
    }
    const Level best = best_level();
    if (text.find_first_not_of(" \t") == std::string::npos) return best;
    Level capped;
    if (!parse_level(text, &capped))
        throw std::invalid_argument(std::string(source) + "='" + text + "' is not an ISA level; use one of: " +
                                    level_names_joined());
    return static_cast<int>(capped) < static_cast<int>(best) ? capped : best;
}

}  // namespace ipxc
