// Tile products of the attention kernel with AVX512-BF16's vdpbf16ps, for CPUs without AMX
// (the avx512_bf16 build of attention.cpp includes this inside its namespace). They compute what
// attention_amx.h's tile products do, on the same packed B tiles: row p of a B tile holds, for
// 16 columns, the bf16 pair at depth 2p, 2p + 1, which is exactly vdpbf16ps's second operand when
// the first is the A row's pair at 2p broadcast to all lanes. C stays in registers: 8 rows x 2
// column blocks (16 accumulators), so each broadcast A pair feeds two products and each B row
// eight.
#pragma once

inline void products_begin() {}
inline void products_end() {}

// The bf16 pair at p (two uint16 values) as one 32-bit lane value.
inline uint32_t pair_at(const uint16_t* p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// A (8 rows of bf16, a_stride apart, depth 32 * chunks) x B0/B1, where chunk c of B0 is the
// 16 x 16 (pairs x columns) tile at b0 + c * chunk_step; row r's two 16-column results go to
// store(r, c0, c1) from registers. Not inlined: in the caller's loops gcc spills accumulators.
template <class Store>
__attribute__((noinline)) void product_8x32(const uint16_t* a, int64_t a_stride, const uint32_t* b0, const uint32_t* b1,
                         int64_t chunk_step, int64_t chunks, const Store& store) {
    constexpr int kR = 8;
    __m512 acc0[kR], acc1[kR];
    for (int r = 0; r < kR; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
    for (int64_t c = 0; c < chunks; ++c) {
        const uint32_t* t0 = b0 + c * chunk_step;
        const uint32_t* t1 = b1 + c * chunk_step;
        const uint16_t* a_chunk = a + c * kDepth;
        for (int p = 0; p < 16; ++p) {
            const __m512bh b_even = (__m512bh)_mm512_loadu_si512(t0 + p * 16);
            const __m512bh b_odd = (__m512bh)_mm512_loadu_si512(t1 + p * 16);
            for (int r = 0; r < kR; ++r) {
                const __m512bh pair = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair_at(a_chunk + r * a_stride + 2 * p)));
                acc0[r] = _mm512_dpbf16_ps(acc0[r], pair, b_even);
                acc1[r] = _mm512_dpbf16_ps(acc1[r], pair, b_odd);
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < kR; ++r) store(r, acc0[r], acc1[r]);
}

// Scores of one query block (16 rows) against key blocks kb0 .. kb0 + G - 1, through the epilogue
// (scale, bias, row max) straight from the accumulators.
template <int G>
void score_keys(const uint16_t* q_block, int64_t q_stride, const uint32_t* packed_k, int64_t kb0, int64_t chunks,
                const ScoreEpilogue& epilogue) {
    const int64_t tile = kTileHalves / 2;  // uint32 values in one B tile
    const int64_t kv_pad = epilogue.kv_pad, bias_stride = epilogue.bias_stride;
    const __m512 scale = epilogue.scale;
    for (int64_t kb = kb0; kb < kb0 + G; kb += 2)
        for (int64_t r0 = 0; r0 < kRows; r0 += 8) {
            const uint32_t* b = packed_k + kb * chunks * tile;
            float* s = epilogue.scores + r0 * kv_pad + kb * 16;
            const float* bias = epilogue.bias + r0 * bias_stride + kb * 16;
            float* row_max = epilogue.row_max[r0];
            product_8x32(q_block + r0 * q_stride, q_stride, b, b + chunks * tile, tile, chunks,
                         [=](int r, __m512 c0, __m512 c1) {  // ScoreEpilogue's steps, on values captured
                             // here (through the struct gcc reloads every field after each store)
                             const __m512 s0 = store_score(c0, scale, bias + r * bias_stride, s + r * kv_pad);
                             const __m512 s1 = store_score(c1, scale, bias + r * bias_stride + 16, s + r * kv_pad + 16);
                             _mm512_store_ps(row_max + 16 * r,
                                             _mm512_max_ps(_mm512_load_ps(row_max + 16 * r), _mm512_max_ps(s0, s1)));
                         });
        }
}

// Scores of one query block against all kv_pad keys: groups of 4 key blocks, then maybe one of 2.
inline void score_block(const uint16_t* q_block, int64_t q_stride, const uint32_t* packed_k, int64_t chunks,
                        const ScoreEpilogue& epilogue) {
    int64_t kb = 0;  // kv_pad / 16 is even
    for (; kb + 4 <= epilogue.kv_pad / 16; kb += 4) score_keys<4>(q_block, q_stride, packed_k, kb, chunks, epilogue);
    if (kb < epilogue.kv_pad / 16) score_keys<2>(q_block, q_stride, packed_k, kb, chunks, epilogue);
}

// Output dim blocks db0 .. db0 + G - 1 of one query block, to c_tiles (G tiles of 16 x 16 fp32).
template <int G>
void weigh_values(const uint16_t* probs, int64_t kv_pad, const uint16_t* packed_v, int64_t db0, int64_t blocks,
                  float* c_tiles) {
    const int64_t tile = kTileHalves / 2;
    const uint32_t* v = reinterpret_cast<const uint32_t*>(packed_v);
    for (int64_t j = 0; j < G; j += 2)
        for (int64_t r0 = 0; r0 < kRows; r0 += 8) {
            const uint32_t* b = v + (db0 + j) * tile;
            float* c = c_tiles + j * 256 + r0 * 16;
            product_8x32(probs + r0 * kv_pad, kv_pad, b, b + tile, blocks * tile, kv_pad / kDepth,
                         [&](int r, __m512 c0, __m512 c1) {
                             _mm512_storeu_ps(c + r * 16, c0);
                             _mm512_storeu_ps(c + 256 + r * 16, c1);
                         });
        }
}
