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

#include <atomic>
#include <cstdint>
#include <cstring>

#include "amx_tiles.h"

namespace ipxc {
namespace IPXC_NS {
namespace {  // each kernel's own copy: nothing here is a shared (weak) symbol between levels' objects

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

// The panels of one call, one contiguous range per thread: the next panel is prefetched while a panel computes,
// which pays only if the same thread runs it next. A thread done with its range takes panels from the end of the
// others', so a core slowed by another process holds the call up by about a panel. Measured against torch's usual
// split (4 ranges a thread, taken in turn), the 48 BERT-base linears at 128 rows: bf16 0.68 against 0.71-0.74 x
// oneDNN's time, int8 0.80 against 0.86 (session 68).
class PanelRanges {
public:
    static constexpr int kMaxParts = 64;  // more threads than that share the last ranges (and take the others')

    PanelRanges(int64_t panels, int parts) {
        for (int t = 0; t < parts; ++t)
            words_[t].store(pack(panels * t / parts, panels * (t + 1) / parts), std::memory_order_relaxed);
    }

    // The range's first panel not yet taken, or -1 (its owner's way in).
    int64_t take_front(int t) { return take(t, true); }
    // The range's last panel not yet taken, or -1 (another thread's way in).
    int64_t take_back(int t) { return take(t, false); }

private:
    static uint64_t pack(int64_t front, int64_t back) {
        return (static_cast<uint64_t>(front) << 32) | static_cast<uint64_t>(back);
    }

    int64_t take(int t, bool front_end) {
        uint64_t word = words_[t].load(std::memory_order_relaxed);
        for (;;) {
            const int64_t front = static_cast<int64_t>(word >> 32), back = static_cast<int64_t>(word & 0xFFFFFFFFu);
            if (front >= back) return -1;
            const uint64_t next = front_end ? pack(front + 1, back) : pack(front, back - 1);
            if (words_[t].compare_exchange_weak(word, next, std::memory_order_relaxed)) return front_end ? front : back - 1;
        }
    }

    std::atomic<uint64_t> words_[kMaxParts];  // per range: first untaken panel << 32 | end of the untaken ones
};

// Rows [0, m) of x (row r at x + r * x_stride bytes, steps * 64 bytes of it read) times the packed panels of w
// (panels < 2^31); store(sums, r0, rows, panel) receives each row pair's 32 x 32 sums (float32 or int32 by P, 128
// bytes a row, 64-byte aligned) once all steps are in.
template <AmxProduct P, class Store>
void amx_panel_gemm(const uint8_t* x, int64_t x_stride, int64_t m, int64_t panels, int64_t steps, const uint8_t* w,
                    int threads, const Store& store) {
    constexpr int64_t kPairs = kAmxRowBlock / 32;
    const int64_t row_bytes = steps * kAmxStepBytes;
    int64_t parts = threads < panels ? threads : panels;
    parts = parts < 1 ? 1 : parts > PanelRanges::kMaxParts ? PanelRanges::kMaxParts : parts;
    for (int64_t b0 = 0; b0 < m; b0 += kAmxRowBlock) {
        const int64_t b1 = b0 + kAmxRowBlock < m ? b0 + kAmxRowBlock : m;
        const int64_t whole = b0 + (b1 - b0) / 32 * 32;  // rows before the last, partial pair
        const int64_t pairs = (b1 - b0 + 31) / 32;
        PanelRanges ranges(panels, static_cast<int>(parts));
        parallel(parts, 1, threads, [&](int64_t first_part, int64_t end_part) {
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
            auto run_panel = [&](int64_t p, int64_t prefetch_panel) {
                const uint8_t* panel = w + p * steps * kAmxBlockBytes;
                PanelPrefetch prefetch;
                if (prefetch_panel >= 0) {
                    prefetch.next = reinterpret_cast<const char*>(w + prefetch_panel * steps * kAmxBlockBytes);
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
            };
            for (int64_t part = first_part; part < end_part; ++part) {  // this thread's own range(s), front first
                const int64_t range_end = panels * (part + 1) / parts;
                for (int64_t p = ranges.take_front(static_cast<int>(part)); p >= 0;
                     p = ranges.take_front(static_cast<int>(part)))
                    run_panel(p, p + 1 < range_end ? p + 1 : -1);
            }
            for (int other = 0; other < parts; ++other)  // then the others' last panels, back first
                for (int64_t p = ranges.take_back(other); p >= 0; p = ranges.take_back(other))
                    run_panel(p, -1);
            _tile_release();
        });
    }
}

}  // namespace
}  // namespace IPXC_NS
}  // namespace ipxc
#endif
