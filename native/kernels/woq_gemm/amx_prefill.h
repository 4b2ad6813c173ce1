// The AMX tile loop of woq_gemm's integer paths' prefill (the amx builds of woq_gemm_w8a8.cpp and
// woq_gemm_w4a8.cpp; include after args.h, int8_rows.h and amx_tiles.h, inside the level's namespace, in every
// build: x_rows, at the end, is how many rows of rounded x a call needs).
//
// tdpbusd multiplies a tile of 16 rows x 64 offset codes of x (u8: xq + 128) by a tile of 16 k-quads x 16 channels
// x 4 weight codes (s8): 16 x 16 x 64 MACs an instruction, 16 vpdpbusd's worth. Rows go in panels of 32 (two A
// tiles) through pairs of 16-channel blocks (two B tiles), four accumulating tiles; per group the sums are stored
// and handed to the path's scaling, which folds them into float32 totals with the same operations as its VNNI
// build (the same exact integers, so the same bits). Groups must be whole 64-k steps.
#pragma once

#if defined(__AMX_INT8__)
constexpr int64_t kAmxRows = 32;

// Whether a call runs on the tiles: more rows than one panel (fewer are decode-like: the VNNI code), and groups
// of whole 64-k steps.
inline bool amx_takes(const WoqGemmArgs& g) { return g.m > kAmxRows && g.group_size % 64 == 0; }

// Rows [p0, p0 + 32) of xu (their codes k apart) through blocks b0 and b1 (b1 == b0: an odd last block, computed
// twice and written once). b_tile(j, k0): block j's B tile for k [k0, k0 + 64), 64-byte rows. scale(j, grp, row,
// sums, total): fold the 16 channels' integer sums of one row and group into total[0 .. 16). Then y = total + bias
// (+ residual) for the rows below m.
template <class BTile, class Scale>
static void amx_pair(const WoqGemmArgs& g, int64_t b0, int64_t b1, int64_t p0, const uint8_t* xu, const BTile& b_tile,
                     const Scale& scale) {
    const int64_t gs = g.group_size, groups = g.k / gs;
    const uint8_t* x0 = xu + p0 * g.k;
    alignas(64) float total[kAmxRows][32] = {};
    alignas(64) int32_t sums[4][16][16];  // tile t: rows 16 * (t / 2) .., block t % 2
    for (int64_t grp = 0; grp < groups; ++grp) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int64_t k0 = grp * gs; k0 < (grp + 1) * gs; k0 += 64) {
            _tile_loadd(4, x0 + k0, g.k);
            _tile_loadd(5, x0 + 16 * g.k + k0, g.k);
            _tile_loadd(6, b_tile(0, k0), 64);
            _tile_loadd(7, b_tile(1, k0), 64);
            _tile_dpbusd(0, 4, 6);
            _tile_dpbusd(1, 4, 7);
            _tile_dpbusd(2, 5, 6);
            _tile_dpbusd(3, 5, 7);
        }
        _tile_stored(0, sums[0], 64);
        _tile_stored(1, sums[1], 64);
        _tile_stored(2, sums[2], 64);
        _tile_stored(3, sums[3], 64);
        for (int t = 0; t < 4; ++t)
            for (int r = 0; r < 16; ++r)
                scale(t % 2, grp, p0 + 16 * (t / 2) + r, _mm512_load_si512(sums[t][r]), total[16 * (t / 2) + r] + 16 * (t % 2));
    }
    const int64_t rows = g.m - p0 < kAmxRows ? g.m - p0 : kAmxRows;
    for (int j = 0; j < (b1 != b0 ? 2 : 1); ++j) {
        const int64_t n0 = (j ? b1 : b0) * 16, cols = g.n - n0 < 16 ? g.n - n0 : 16;
        for (int64_t r = 0; r < rows; ++r) {
            float* y = g.y + (p0 + r) * g.y_stride + n0;
            for (int64_t c = 0; c < cols; ++c) y[c] = total[r][16 * j + c] + (g.bias ? g.bias[n0 + c] : 0.0f);
            add_residual(g, p0 + r, p0 + r + 1, n0, cols);
        }
    }
}

// Every row in panels of kAmxRows (xu holds whole panels) through pairs of blocks, parallel over the pairs. Per
// thread, block_sums(blk, out) first writes 128 * (sum of block blk's codes) per group into out[0 .. groups) for
// the blocks of its pairs, then pair(sums, b0, b1, p0) runs every panel and pair (sums: b0's groups, then b1's),
// a panel's codes staying in L1/L2 while the pairs pass.
template <class BlockSums, class Pair>
static void amx_pairs(const WoqGemmArgs& g, const BlockSums& block_sums, const Pair& pair) {
    const int64_t blocks = (g.n + 15) / 16, pairs = (blocks + 1) / 2, groups = g.k / g.group_size;
    parallel(pairs, 1, g.threads, [&](int64_t begin, int64_t end) {
        float* scratch = scratch_floats((end - begin) * 2 * groups * 16 + 16);
        __m512i* sums = reinterpret_cast<__m512i*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t(63));
        for (int64_t p = begin; p < end; ++p)
            for (int j = 0; j < 2; ++j)
                block_sums(2 * p + j < blocks ? 2 * p + j : blocks - 1, sums + ((p - begin) * 2 + j) * groups);
        load_tiles_16x64();
        for (int64_t p0 = 0; p0 < g.m; p0 += kAmxRows)
            for (int64_t p = begin; p < end; ++p) {
                const int64_t b0 = 2 * p, b1 = b0 + 1 < blocks ? b0 + 1 : b0;
                pair(sums + (p - begin) * 2 * groups, b0, b1, p0);
            }
        _tile_release();
    });
}
#endif

// Rows the caller rounds x into (every build): whole panels where the tiles run (rows past m: scale 0; computed,
// never written), m elsewhere.
inline int64_t x_rows(const WoqGemmArgs& g) {
#if defined(__AMX_INT8__)
    if (amx_takes(g)) return (g.m + kAmxRows - 1) / kAmxRows * kAmxRows;
#endif
    return g.m;
}
