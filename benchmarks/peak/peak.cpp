// Peak multiply-accumulate rate of this CPU's AVX-512 and AVX2 multiply-add instructions, for benchmarks/peak.py.
// Each function runs `iters` steps of 12 independent accumulator chains (enough to cover the
// instruction's latency at one issue per cycle) on `threads` OpenMP threads and returns a value
// derived from every accumulator so nothing is optimised away. MACs per step: vfmadd231ps
// zmm 16 (fp32), vdpbf16ps zmm 32 (bf16 pairs), vpdpbusd zmm 64 (u8 x s8 quads); AVX2 (what a CPU
// without AVX-512 has): vfmadd231ps ymm 8, and vpmaddwd + vpaddd ymm 16 (int16 pairs summed into
// int32: the exact int8 path of our int8_gemm on CPUs without VNNI). AMX (built where the compiler takes -mamx-*):
// tdpbf16ps (16 x 16 x 32 = 8192 bf16 MACs) and tdpbusd (16 x 16 x 64 = 16384 u8 x s8 MACs) on four accumulator
// tiles with their operands loaded once, 12 tile products a step: the tiles' own rate, no loads. peak.py builds it twice: with AVX-512 flags,
// and with AVX2 flags alone (the AVX-512 parts compiled out), since with -mavx512f the compiler may use AVX-512 in any
// function, the AVX2 ones included: an illegal instruction on an AVX2-only CPU.
#include <immintrin.h>
#include <omp.h>
#if defined(__AMX_TILE__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace {
constexpr int kChains = 12;

// The vector type a kernel's chains run in: its set1, add and horizontal sum.
#ifdef __AVX512F__
struct Zmm {
    using V = __m512;
    static V set1(float x) { return _mm512_set1_ps(x); }
    static V add(V a, V b) { return _mm512_add_ps(a, b); }
    static float sum(V v) { return _mm512_reduce_add_ps(v); }
};
#endif
struct Ymm {
    using V = __m256;
    static V set1(float x) { return _mm256_set1_ps(x); }
    static V add(V a, V b) { return _mm256_add_ps(a, b); }
    static float sum(V v) {
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, v);
        float total = 0.0f;
        for (float lane : lanes) total += lane;
        return total;
    }
};

template <class T, class Step>
float run_chains(long iters, int threads, Step step) {
    float total = 0.0f;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
        typename T::V acc[kChains];
        for (int i = 0; i < kChains; ++i) acc[i] = T::set1(1e-3f * (omp_get_thread_num() + i));
        for (long it = 0; it < iters; ++it)
#pragma GCC unroll 12
            for (int i = 0; i < kChains; ++i) acc[i] = step(acc[i]);  // unrolled: acc stays in registers
        typename T::V sum = acc[0];
        for (int i = 1; i < kChains; ++i) sum = T::add(sum, acc[i]);
        total += T::sum(sum);
    }
    return total;
}
}  // namespace

extern "C" {
#ifdef __AVX512F__
float fp32_fma(long iters, int threads) {
    const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-6f);
    return run_chains<Zmm>(iters, threads, [&](__m512 c) { return _mm512_fmadd_ps(a, c, b); });
}

float bf16_dot(long iters, int threads) {
    const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80), b = (__m512bh)_mm512_set1_epi32(0x33d633d6);
    return run_chains<Zmm>(iters, threads, [&](__m512 c) { return _mm512_dpbf16_ps(c, a, b); });
}

float int8_dot(long iters, int threads) {
    const __m512i a = _mm512_set1_epi32(0x01010101), b = _mm512_set1_epi32(0x01010101);
    return run_chains<Zmm>(iters, threads, [&](__m512 c) {
        return _mm512_castsi512_ps(_mm512_dpbusd_epi32(_mm512_castps_si512(c), a, b));
    });
}
#endif

float fp32_fma_avx2(long iters, int threads) {
    const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-6f);
    return run_chains<Ymm>(iters, threads, [&](__m256 c) { return _mm256_fmadd_ps(a, c, b); });
}

// What an AVX2 int8 path with 7-bit activations or weights (or one that accepts vpmaddubsw's saturation) could peak
// at: vpmaddubsw's u8 x s8 pairs into int16, vpmaddwd against ones to widen them, vpaddd. 32 MACs a step.
float int8_maddubs_avx2(long iters, int threads) {
    const __m256i ones = _mm256_set1_epi16(1), w = _mm256_set1_epi8(3);
    return run_chains<Ymm>(iters, threads, [&](__m256 c) {
        const __m256i acc = _mm256_castps_si256(c);
        return _mm256_castsi256_ps(_mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(acc, w), ones)));
    });
}

float int8_madd_avx2(long iters, int threads) {
    const __m256i b = _mm256_set1_epi16(1);
    return run_chains<Ymm>(iters, threads, [&](__m256 c) {  // the product reads the chain: nothing to hoist
        const __m256i acc = _mm256_castps_si256(c);
        return _mm256_castsi256_ps(_mm256_add_epi32(acc, _mm256_madd_epi16(acc, b)));
    });
}
}

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AMX_INT8__)
namespace {
// Linux hands AMX's tile data state to a process that asks for it (arch_prctl ARCH_REQ_XCOMP_PERM, feature 18).
bool amx_permitted() {
    static const bool ok = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
    return ok;
}

// Palette 1: tiles 0-3 accumulators, 4-5 A operands, 6-7 B operands, each 16 rows of 64 bytes.
struct alignas(64) TileConfig {
    unsigned char palette = 1, start_row = 0, reserved[14] = {};
    unsigned short bytes_per_row[16] = {};
    unsigned char rows[16] = {};
};

template <class Product>
float run_tiles(long iters, int threads, Product product) {
    if (!amx_permitted()) return -1.0f;
    float total = 0.0f;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
        TileConfig config;
        for (int t = 0; t < 8; ++t) config.bytes_per_row[t] = 64, config.rows[t] = 16;
        _tile_loadconfig(&config);
        alignas(64) unsigned char operands[1024];
        for (int i = 0; i < 1024; ++i) operands[i] = static_cast<unsigned char>(i % 7 == 0);
        _tile_loadd(4, operands, 64);
        _tile_loadd(5, operands, 64);
        _tile_loadd(6, operands, 64);
        _tile_loadd(7, operands, 64);
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (long it = 0; it < iters; ++it) product();
        alignas(64) float out[256];
        _tile_stored(0, out, 64);
        total += out[0];
        _tile_release();
    }
    return total;
}
}  // namespace
#define IPXC_TILE_STEP(op)                                                                                 \
    [] {                                                                                                   \
        for (int round = 0; round < 3; ++round) {                                                          \
            op(0, 4, 6);                                                                                   \
            op(1, 4, 7);                                                                                   \
            op(2, 5, 6);                                                                                   \
            op(3, 5, 7);                                                                                   \
        }                                                                                                  \
    }

extern "C" {
float amx_bf16(long iters, int threads) { return run_tiles(iters, threads, IPXC_TILE_STEP(_tile_dpbf16ps)); }
float amx_int8(long iters, int threads) { return run_tiles(iters, threads, IPXC_TILE_STEP(_tile_dpbusd)); }
}
#endif
