// The loop the AMX tile GEMMs share (bf16_amx_gemm: tdpbf16ps on bf16 pairs; int8_amx_gemm: tdpbusd on u8 x s8
// quads): rows of x times a weight packed in 32-channel panels, for the row counts (a few hundred) where a layer
// is bound by moving its weight. Include after common.h; only the amx level compiles it.
//
// Byte geometry, the same for both: a tile step covers 64 bytes of each row of x (32 bf16 or 64 int8 of k); the
// packed weight is [n / 32][steps][16][32][4 bytes]: per panel of 32 channels and step, 16 rows of the 32
// channels' 4 bytes (a bf16 pair or an int8 quad of k) side by side, 2 KiB, so the B tile of channels 16h .. 16h +
// 15 is 16 rows of 64 bytes at offset 64h, 128 bytes apart.
//
// Per thread a range of panels; per panel, the steps in chunks of kAmxChunkSteps: the chunk's B tiles (16 KiB)
// stay in L1 while every row pair of the block passes over them (pairs of 16-row A tiles read from x as it lies),
// each pair's four accumulating tiles parked in a per-thread buffer between chunks; the next panel's weight is
// prefetched into L2 a few lines a step, spread over the current panel's steps, so memory streams while the tiles
// compute (a prefetch burst per panel measured nothing, session 66). Measured on 2 cores of an AMX Xeon against one
// pass over all of k per row pair, the weight of the first pair from memory and then from L2 (session 66's
// loop): BERT-base's 48 bf16 linears at 128 rows 0.84 x the time, 64 rows 0.90, 192-256 rows 0.83-0.85 (a read
// pass over their 170 MB alone took 5.5-5.9 ms, the tile loop with the weight hot ~10, the old loop 14-16). Rows go
// in blocks of kAmxRowBlock; a last pair of fewer than 32 rows is copied into a zero-padded buffer first (a tile
// reads 16 whole rows); 16 rows or fewer run one A tile.
#pragma once

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AMX_INT8__)
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "amx_tiles.h"

namespace ipxc {
namespace IPXC_NS {

constexpr int64_t kAmxRowBlock = 256;
constexpr int64_t kAmxChunkSteps = 8;
constexpr int64_t kAmxStepBytes = 64;     // of each row of x
constexpr int64_t kAmxBlockBytes = 2048;  // of the packed weight, per panel and step

enum class AmxProduct { bf16, u8s8 };

// Software prefetch of the next panel's weight into L2, a few lines at a time.
struct PanelPrefetch {
    const char* next = nullptr;  // null: nothing to prefetch
    int64_t line = 0, lines = 0, per_step = 0;

    inline void step() {
        if (next == nullptr) return;
        for (int64_t i = 0; i < per_step && line < lines; ++i, ++line) _mm_prefetch(next + line * 64, _MM_HINT_T1);
    }
};

template <AmxProduct P>
inline void amx_dot_0_4_6() { if constexpr (P == AmxProduct::bf16) _tile_dpbf16ps(0, 4, 6); else _tile_dpbusd(0, 4, 6); }
template <AmxProduct P>
inline void amx_dot_1_4_7() { if constexpr (P == AmxProduct::bf16) _tile_dpbf16ps(1, 4, 7); else _tile_dpbusd(1, 4, 7); }
template <AmxProduct P>
inline void amx_dot_2_5_6() { if constexpr (P == AmxProduct::bf16) _tile_dpbf16ps(2, 5, 6); else _tile_dpbusd(2, 5, 6); }
template <AmxProduct P>
inline void amx_dot_3_5_7() { if constexpr (P == AmxProduct::bf16) _tile_dpbf16ps(3, 5, 7); else _tile_dpbusd(3, 5, 7); }

// Steps [s0, s1) of one or two 16-row A tiles (Two) at x0 (x_stride bytes apart) times a panel's two B tiles per
// step, into accumulating tiles 0, 1 (and 2, 3).
template <AmxProduct P, bool Two>
inline void panel_products(const uint8_t* x0, int64_t x_stride, const uint8_t* panel, int64_t s0, int64_t s1,
                           PanelPrefetch& prefetch) {
    for (int64_t s = s0; s < s1; ++s) {
        const uint8_t* b = panel + s * kAmxBlockBytes;
        prefetch.step();
        _tile_loadd(4, x0 + kAmxStepBytes * s, x_stride);
        _tile_loadd(6, b, 128);
        amx_dot_0_4_6<P>();
        _tile_loadd(7, b + 64, 128);
        amx_dot_1_4_7<P>();
        if (Two) {
            _tile_loadd(5, x0 + 16 * x_stride + kAmxStepBytes * s, x_stride);
            amx_dot_2_5_6<P>();
            amx_dot_3_5_7<P>();
        }
    }
}

// Steps [s0, s1) of rows (<= 32; x0 their first, x_stride bytes apart) times a panel, added to the pair's sums c
// (32 rows of 32 four-byte sums, 128 bytes apart; zeroed by the first chunk).
template <AmxProduct P>
void pair_chunk(const uint8_t* x0, int64_t x_stride, int64_t rows, const uint8_t* panel, int64_t s0, int64_t s1,
                void* c_sums, PanelPrefetch& prefetch) {
    char* c = static_cast<char*>(c_sums);
    const bool two = rows > 16;
    if (s0 == 0) {  // tile t holds rows 16 (t / 2) .. and channels 16 (t % 2) .. of c
        _tile_zero(0);
        _tile_zero(1);
        if (two) {
            _tile_zero(2);
            _tile_zero(3);
        }
    } else {
        _tile_loadd(0, c, 128);
        _tile_loadd(1, c + 64, 128);
        if (two) {
            _tile_loadd(2, c + 2048, 128);
            _tile_loadd(3, c + 2048 + 64, 128);
        }
    }
    if (two)
        panel_products<P, true>(x0, x_stride, panel, s0, s1, prefetch);
    else
        panel_products<P, false>(x0, x_stride, panel, s0, s1, prefetch);
    _tile_stored(0, c, 128);
    _tile_stored(1, c + 64, 128);
    if (two) {
        _tile_stored(2, c + 2048, 128);
        _tile_stored(3, c + 2048 + 64, 128);
    }
}

// Rows [0, m) of x (row r at x + r * x_stride bytes, steps * 64 bytes of it read) times the packed panels of w;
// store(sums, r0, rows, panel) receives each row pair's 32 x 32 sums (float32 or int32 by P, 128 bytes a row,
// 64-byte aligned) once all steps are in.
template <AmxProduct P, class Store>
void amx_panel_gemm(const uint8_t* x, int64_t x_stride, int64_t m, int64_t panels, int64_t steps, const uint8_t* w,
                    int threads, const Store& store) {
    constexpr int64_t kPairs = kAmxRowBlock / 32;
    const int64_t row_bytes = steps * kAmxStepBytes;
    for (int64_t b0 = 0; b0 < m; b0 += kAmxRowBlock) {
        const int64_t b1 = b0 + kAmxRowBlock < m ? b0 + kAmxRowBlock : m;
        const int64_t whole = b0 + (b1 - b0) / 32 * 32;  // rows before the last, partial pair
        const int64_t pairs = (b1 - b0 + 31) / 32;
        parallel(panels, 1, threads, [&](int64_t begin, int64_t end) {
            load_tiles_16x64();
            // The pairs' sums between chunks (32 KiB), and the partial pair's rows zero-padded to 32 (tiles read
            // whole rows of 16): once per thread and block.
            float* const buffer = scratch_floats(kPairs * 1024 + 8 * row_bytes + 16);
            char* sums = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(buffer) + 63) & ~uintptr_t{63});
            uint8_t* pad = reinterpret_cast<uint8_t*>(sums + kPairs * 4096);  // 32 rows of row_bytes
            if (whole < b1) {
                std::memset(pad, 0, static_cast<size_t>(32 * row_bytes));
                for (int64_t r = whole; r < b1; ++r)
                    std::memcpy(pad + (r - whole) * row_bytes, x + r * x_stride, static_cast<size_t>(row_bytes));
            }
            for (int64_t p = begin; p < end; ++p) {
                const uint8_t* panel = w + p * steps * kAmxBlockBytes;
                PanelPrefetch prefetch;
                if (p + 1 < end) {
                    prefetch.next = reinterpret_cast<const char*>(panel + steps * kAmxBlockBytes);
                    prefetch.lines = steps * (kAmxBlockBytes / 64);
                    prefetch.per_step = (prefetch.lines + pairs * steps - 1) / (pairs * steps);
                }
                for (int64_t s0 = 0; s0 < steps; s0 += kAmxChunkSteps) {
                    const int64_t s1 = s0 + kAmxChunkSteps < steps ? s0 + kAmxChunkSteps : steps;
                    for (int64_t i = 0; i < pairs; ++i) {
                        const int64_t r = b0 + 32 * i;
                        if (r < whole)
                            pair_chunk<P>(x + r * x_stride, x_stride, 32, panel, s0, s1, sums + i * 4096, prefetch);
                        else
                            pair_chunk<P>(pad, row_bytes, b1 - r, panel, s0, s1, sums + i * 4096, prefetch);
                    }
                }
                for (int64_t i = 0; i < pairs; ++i) {
                    const int64_t r = b0 + 32 * i;
                    store(sums + i * 4096, r, (r + 32 < b1 ? r + 32 : b1) - r, p);
                }
            }
            _tile_release();
        });
    }
}

}  // namespace IPXC_NS
}  // namespace ipxc
#endif
