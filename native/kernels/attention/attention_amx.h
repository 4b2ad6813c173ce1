// Tile products of the attention kernel on AMX (the amx build of attention.cpp includes this
// inside its namespace). The score and value products read the same packed B layout as the
// AVX512-BF16 version in attention_dpbf16.h; see attention.cpp for the shapes.
#pragma once

// Tiles 0-3 accumulate (C, 16 x 16 fp32) so that up to four tdpbf16ps chains overlap; tile 4
// holds the A operand (16 x 32 bf16), tiles 6 and 7 alternate as B (16 pairs x 16 columns).
// The tile intrinsics paste their numbers into register names, so they are literals below.

// Per thread, around its (batch, head) units; every tile 16 rows (kRows) of 64 bytes (amx_tiles.h).
static_assert(kRows == 16, "load_tiles_16x64 configures 16-row tiles");
inline void products_begin() { load_tiles_16x64(); }
inline void products_end() { _tile_release(); }

// G (2 or 4) accumulators: C[j] = A x B(tile j), A loaded once per depth step.
template <int G>
inline void zero_accumulators() {
    _tile_zero(0);
    _tile_zero(1);
    if constexpr (G == 4) {
        _tile_zero(2);
        _tile_zero(3);
    }
}

// B tiles at b, b + b_step, ... (G of them, 64-byte rows) against the A tile already loaded.
template <int G>
inline void multiply_accumulate(const void* b, int64_t b_step_bytes) {
    const char* p = static_cast<const char*>(b);
    _tile_loadd(6, p, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_loadd(7, p + b_step_bytes, 64);
    _tile_dpbf16ps(1, 4, 7);
    if constexpr (G == 4) {
        _tile_loadd(6, p + 2 * b_step_bytes, 64);
        _tile_dpbf16ps(2, 4, 6);
        _tile_loadd(7, p + 3 * b_step_bytes, 64);
        _tile_dpbf16ps(3, 4, 7);
    }
}

// C[j] to dst + j * step_bytes, rows stride_bytes apart.
template <int G>
inline void store_accumulators(void* dst, int64_t step_bytes, int64_t stride_bytes) {
    char* p = static_cast<char*>(dst);
    _tile_stored(0, p, stride_bytes);
    _tile_stored(1, p + step_bytes, stride_bytes);
    if constexpr (G == 4) {
        _tile_stored(2, p + 2 * step_bytes, stride_bytes);
        _tile_stored(3, p + 3 * step_bytes, stride_bytes);
    }
}

// Raw sums of one query block against key blocks kb0 .. kb0 + G - 1, stored into the block's score rows.
template <int G>
void score_tiles(const uint16_t* q_block, int64_t q_stride, const uint32_t* packed_k, int64_t kb0, int64_t chunks,
                 float* scores, int64_t kv_pad) {
    zero_accumulators<G>();
    for (int64_t c = 0; c < chunks; ++c) {
        _tile_loadd(4, q_block + c * kDepth, q_stride * 2);
        multiply_accumulate<G>(packed_k + (kb0 * chunks + c) * (kTileHalves / 2), chunks * kTileHalves * 2);
    }
    store_accumulators<G>(scores + kb0 * 16, 16 * 4, kv_pad * 4);
}

// Scores of one query block against all kv_pad keys, in groups of 4 key blocks (then maybe one of 2). A group's
// epilogue (scale, bias, row max: score_epilogue) runs once the next group's tile products are issued, so the tiles
// compute while the vector unit reads what the group before stored; read right after its tile store, a group waited
// for the store to land. The attention kernel alone 0.93-0.95 x the time at BERT-base's shapes (1 thread, the two
// ways interleaved in one process; session 69).
inline void score_block(const uint16_t* q_block, int64_t q_stride, const uint32_t* packed_k, int64_t chunks,
                        const ScoreEpilogue& epilogue) {
    const int64_t key_blocks = epilogue.kv_pad / 16;  // even
    int64_t done = 0;  // columns through the epilogue
    for (int64_t kb = 0; kb < key_blocks;) {
        const int64_t group = key_blocks - kb >= 4 ? 4 : 2;
        if (group == 4)
            score_tiles<4>(q_block, q_stride, packed_k, kb, chunks, epilogue.scores, epilogue.kv_pad);
        else
            score_tiles<2>(q_block, q_stride, packed_k, kb, chunks, epilogue.scores, epilogue.kv_pad);
        if (kb > 0) score_epilogue(epilogue, done, kb * 16);
        done = kb * 16;
        kb += group;
    }
    score_epilogue(epilogue, done, epilogue.kv_pad);
}

// Output dim blocks db0 .. db0 + G - 1 of one query block, to c_tiles (G tiles of 16 x 16 fp32).
template <int G>
void weigh_values(const uint16_t* probs, int64_t kv_pad, const uint16_t* packed_v, int64_t db0, int64_t blocks,
                  float* c_tiles) {
    zero_accumulators<G>();
    for (int64_t kc = 0; kc < kv_pad / kDepth; ++kc) {
        _tile_loadd(4, probs + kc * kDepth, kv_pad * 2);
        multiply_accumulate<G>(packed_v + (kc * blocks + db0) * kTileHalves, kTileHalves * 2);
    }
    store_accumulators<G>(c_tiles, 256 * 4, 64);
}
