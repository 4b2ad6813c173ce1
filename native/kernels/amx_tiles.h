// AMX tile configuration shared by the amx builds (attention's products, woq_gemm_w8a8's prefill): every tile 16
// rows of 64 bytes (A: 16 x 64 bytes or 16 x 32 bf16; B: 16 rows of k-pairs or k-quads x 16 columns; C: 16 x 16
// int32 or float32). Include after common.h, outside any namespace; only the amx level compiles it.
#pragma once

#if defined(__AMX_TILE__)
#include <immintrin.h>

#include <cstring>

namespace ipxc {
namespace IPXC_NS {

struct alignas(64) TileConfig {
    uint8_t palette_id;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

// Per thread, before its tile instructions (_tile_release() after them).
inline void load_tiles_16x64() {
    TileConfig config;
    std::memset(&config, 0, sizeof config);
    config.palette_id = 1;
    for (int t = 0; t < 8; ++t) {
        config.colsb[t] = 64;
        config.rows[t] = 16;
    }
    // Not _tile_loadconfig: gcc 12's version tells the compiler it reads 8 bytes of the config,
    // so the stores filling the rest may be dropped. This operand is the whole struct.
    __asm__ volatile("ldtilecfg %0" ::"m"(config));
}

}  // namespace IPXC_NS
}  // namespace ipxc
#endif
