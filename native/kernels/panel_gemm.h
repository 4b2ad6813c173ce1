// panel_gemm: the many-rows (prefill) GEMM of the kernels whose weights are not float32 in memory, y[m, n] =
// x[m, k] . W^T summed in float32: woq_gemm (int8 / int4 codes) and bf16_gemm (bf16). Include after common.h.
//
// Why this shape (measured on a 2-core AVX-512 Xeon, 512 rows x Qwen2-0.5B layer shapes, against MKL's packed
// sgemm on float32 weights): the weight is turned into float32 one panel at a time (kNR output channels x kKC
// of k, in a per-thread scratch that stays in L1), and a register-tiled micro-kernel (AVX-512: 14 rows x 32
// channels, AVX2: 6 x 16, every accumulator in a register; alone it runs at the FMA peak) runs the panel over a
// chunk of x's rows. The k blocks are the outer loop over a group of tasks (panels x row chunks) whose float32
// sums wait in a stage: each panel is widened once per k block for all of a chunk's rows (up to kChunkRows), the
// chunk's kc-slice of x is packed right before into tiles of kMR rows, k-major (one contiguous stream of
// broadcasts per tile; it stays in L2), and the group's results are written out row by row, so each row of y is
// written in order. Single thread, 512 x 4096 x 896, bf16: 1.35x MKL's time at first, 1.2x with the packing and
// chunks, ~1.07x with k outermost and in-order writes (the fill then ~7 %, the writes ~4 %).
//
// The caller supplies fill(n0, k0, kc, panel): panel[(k - k0) * kNR + c] = W[n0 + c, k] for c < kNR, k in
// [k0, k0 + kc), zeros for channels past n; and finish(r_begin, r_end, n0, cols, stage): stage row i holds
// y[r_begin + i, n0 .. n0 + kNR) (no bias), to be written out with the caller's bias, residual and rounding.
#pragma once

#include "common.h"
#include "vec16.h"

namespace ipxc {
namespace IPXC_NS {
namespace panel_gemm {

#if IPXC_HAVE_AVX512
constexpr int kMR = 14;  // rows x 2 blocks = 28 accumulators of 32 zmm
constexpr int kCB = 2;
#elif IPXC_V16_AVX2
constexpr int kMR = 6;  // rows x 16 channels = 12 of 16 ymm
constexpr int kCB = 1;
#else
constexpr int kMR = 4;
constexpr int kCB = 1;
#endif
constexpr int kNR = kCB * 16;            // output channels per panel
static_assert(kMR <= 16, "pack_slice transposes 16 rows at most");
constexpr int64_t kKC = 256;             // k per panel (AVX-512: 32 KiB of floats)
constexpr int64_t kChunkRows = 512;      // rows of x per task at most (their kc-slice: 512 KiB of floats)
constexpr int64_t kStageFloats = 1 << 19;  // a group's float32 sums (2 MiB)
constexpr int64_t kMinMacsPerTask = 1 << 16;

struct Shape {
    int64_t m, n, k;
    int threads;
};

// Rows [r_begin, r_end) and k [k0, k0 + kc) of x (float32 or bf16 bits, row r at x + r * x_stride) as float32
// tiles of kMR rows, k-major: xs[t][k - k0][i] = x[r_begin + t * kMR + i, k], rows past r_end zeros. Packed per k
// block, right before its use, so it stays in L2 (all of a 512 x 4864 x packed up front was 10 MB of floats
// written to memory and read back: ~2 ms of a 30 ms call).
template <class XT>
static void pack_slice(const XT* x, int64_t x_stride, int64_t r_begin, int64_t r_end, int64_t k0, int64_t kc,
                       float* xs) {
    for (int64_t r0 = r_begin; r0 < r_end; r0 += kMR, xs += kc * kMR) {
        const int rows = static_cast<int>(r_end - r0 < kMR ? r_end - r0 : kMR);
        const XT* src = x + r0 * x_stride + k0;
        float* dst = xs;
        int64_t k = 0;
        for (; k + 16 <= kc; k += 16, dst += 16 * kMR) {  // 16 k at a time: the tile's rows as vectors, transposed
            V16 m[16];
            for (int r = 0; r < 16; ++r) m[r] = r < rows ? v_load(src + r * x_stride + k) : v_zero();
            v_transpose_16x16(m);
            alignas(64) float column[16];
            for (int j = 0; j < 16; ++j) {
                v_store(column, m[j]);
                std::memcpy(dst + j * kMR, column, kMR * sizeof(float));
            }
        }
        for (; k < kc; ++k, dst += kMR) {
            for (int r = 0; r < rows; ++r) dst[r] = load(src[r * x_stride + k]);
            for (int r = rows; r < kMR; ++r) dst[r] = 0.0f;
        }
    }
}

// stage[r][0 .. kNR) (+)= x_tile[k][r] . panel[k][0 .. kNR) over kc, for the tile's first MR rows.
template <int MR>
static void tile(const float* x_tile, int64_t kc, const float* panel, float* stage, bool accumulate) {
    V16 acc[MR][kCB];
    for (int r = 0; r < MR; ++r)
        for (int c = 0; c < kCB; ++c) acc[r][c] = v_zero();
    for (int64_t k = 0; k < kc; ++k) {
        V16 w[kCB];
        for (int c = 0; c < kCB; ++c) w[c] = v_load(panel + k * kNR + c * 16);
        for (int r = 0; r < MR; ++r) {
            const V16 xb = v_set1(x_tile[k * kMR + r]);
            for (int c = 0; c < kCB; ++c) acc[r][c] = v_fma(w[c], xb, acc[r][c]);
        }
    }
    for (int r = 0; r < MR; ++r)
        for (int c = 0; c < kCB; ++c) {
            float* out = stage + r * kNR + c * 16;
            v_store(out, accumulate ? v_add(acc[r][c], v_load(out)) : acc[r][c]);
        }
}

template <int MR>
static void tile_rows(int rows, const float* x_tile, int64_t kc, const float* panel, float* stage, bool accumulate) {
    if constexpr (MR > 1) {
        if (rows < MR) return tile_rows<MR - 1>(rows, x_tile, kc, panel, stage, accumulate);
    }
    tile<MR>(x_tile, kc, panel, stage, accumulate);
}

// out[0 .. cols) = sums + bias[n0 ..] (sums alone where bias is null): whole vectors for a full panel, which the
// scalar loop alone did not become (a finish runs it for every row of y).
static inline void sums_plus_bias(const float* sums, const float* bias, int64_t n0, int64_t cols, float* out) {
    if (cols == kNR) {
        for (int c = 0; c < kCB; ++c) {
            const V16 sum = v_load(sums + c * 16);
            v_store(out + c * 16, bias ? v_add(sum, v_load(bias + n0 + c * 16)) : sum);
        }
        return;
    }
    for (int64_t j = 0; j < cols; ++j) out[j] = bias ? sums[j] + bias[n0 + j] : sums[j];
}

template <class XT, class Fill, class Finish>
static void run(const XT* x, int64_t x_stride, const Shape& s, const Fill& fill, const Finish& finish) {
    if (s.m <= 0 || s.n <= 0) return;
    const int64_t units = (s.n + kNR - 1) / kNR;
    // Few units (a narrow layer): split the rows too, so every thread gets work; each task then fills its
    // panels itself, a small cost next to its rows' FMAs. Many rows: chunks whose kc-slice of x stays in L2.
    int64_t row_chunks = units >= 2 * s.threads ? 1 : (2 * s.threads + units - 1) / units;
    const int64_t l2_chunks = (s.m + kChunkRows - 1) / kChunkRows;
    if (row_chunks < l2_chunks) row_chunks = l2_chunks;
    int64_t chunk_rows = (s.m + row_chunks - 1) / row_chunks;
    chunk_rows = (chunk_rows + kMR - 1) / kMR * kMR;
    if (chunk_rows < 4 * kMR) chunk_rows = 4 * kMR;
    row_chunks = (s.m + chunk_rows - 1) / chunk_rows;
    const int64_t kc_max = s.k < kKC ? s.k : kKC;
    const int64_t work = (chunk_rows < s.m ? chunk_rows : s.m) * s.k * kNR;
    const int64_t grain = work >= kMinMacsPerTask ? 1 : kMinMacsPerTask / work;
    // A task's sums stay in its stage across the k blocks; a group of tasks shares each k block's pass, so x's
    // kc-slice is read from L2 by every panel of the group and each panel is widened once per k block for all
    // of the chunk's rows (k outermost per task re-filled a panel once per chunk and re-read x's whole chunk).
    const int64_t group = kStageFloats / (chunk_rows * kNR) > 1 ? kStageFloats / (chunk_rows * kNR) : 1;
    // Each parallel chunk of tasks packs x's slices once per k block: chunks as big as a group, or an equal share
    // per thread where that is smaller (parallel_for's default quarter shares would pack them four times as often).
    // Their count a multiple of the threads, so each thread gets as many: 304 panels (Qwen2-0.5B's 4864-wide gate
    // and up) in chunks of 64 left 5 chunks, 176 panels on one thread and 128 on the other (1.16x the call).
    const int64_t tasks_total = units * row_chunks, share = tasks_total / s.threads > 1 ? tasks_total / s.threads : 1;
    const int64_t widest = group < share ? group : share;
    int64_t parts = (tasks_total + widest - 1) / widest;
    parts = (parts + s.threads - 1) / s.threads * s.threads;
    const int64_t chunk_grain = (tasks_total + parts - 1) / parts;
    parallel(tasks_total, grain > chunk_grain ? grain : chunk_grain, s.threads, [&](int64_t begin, int64_t end) {
        const int64_t tasks = end - begin < group ? end - begin : group;
        // 64-byte aligned: a panel row or stage row is whole vectors, and an unaligned one would split every
        // load across two cache lines (the scratch itself is only 16-byte aligned).
        float* scratch = scratch_floats(kc_max * kNR + tasks * chunk_rows * kNR + chunk_rows * kc_max + 16);
        float* panel = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
        float* stages = panel + kc_max * kNR;
        float* xs = stages + tasks * chunk_rows * kNR;  // x's slice for the current chunk and k block
        for (int64_t g0 = begin; g0 < end; g0 += group) {
            const int64_t g1 = g0 + group < end ? g0 + group : end;
            for (int64_t k0 = 0; k0 < s.k; k0 += kc_max) {
                const int64_t kc = s.k - k0 < kc_max ? s.k - k0 : kc_max;
                int64_t packed = -1;  // the chunk whose rows xs holds
                for (int64_t task = g0; task < g1; ++task) {
                    const int64_t chunk = task / units, unit = task % units;  // a thread's tasks share x's chunks
                    const int64_t r_begin = chunk * chunk_rows;
                    const int64_t r_end = r_begin + chunk_rows < s.m ? r_begin + chunk_rows : s.m;
                    if (chunk != packed) pack_slice(x, x_stride, r_begin, r_end, k0, kc, xs), packed = chunk;
                    float* stage = stages + (task - g0) * chunk_rows * kNR;
                    fill(unit * kNR, k0, kc, panel);
                    for (int64_t r = r_begin; r < r_end; r += kMR) {
                        const int rows = static_cast<int>(r_end - r < kMR ? r_end - r : kMR);
                        tile_rows<kMR>(rows, xs + (r - r_begin) * kc, kc, panel, stage + (r - r_begin) * kNR, k0 > 0);
                    }
                }
            }
            // Row by row across the group's panels, so each row of y is written in order (a panel's rows at a
            // time wrote 64 bytes per row of y, each line fetched on its own: 8 % of a 512 x 4096 x 896 call).
            for (int64_t t0 = g0; t0 < g1;) {
                const int64_t chunk = t0 / units, t1 = (chunk + 1) * units < g1 ? (chunk + 1) * units : g1;
                const int64_t r_begin = chunk * chunk_rows;
                const int64_t r_end = r_begin + chunk_rows < s.m ? r_begin + chunk_rows : s.m;
                for (int64_t r = r_begin; r < r_end; ++r)
                    for (int64_t task = t0; task < t1; ++task) {
                        const int64_t n0 = task % units * kNR, cols = s.n - n0 < kNR ? s.n - n0 : kNR;
                        finish(r, r + 1, n0, cols, stages + ((task - g0) * chunk_rows + r - r_begin) * kNR);
                    }
                t0 = t1;
            }
        }
    });
}

}  // namespace panel_gemm
}  // namespace IPXC_NS
}  // namespace ipxc
