// GEMV bf16 [n,k] x f32 [k] variants: rows interleaved CB at a time, STEP k per iteration, software prefetch.
#include <immintrin.h>
#include <omp.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <vector>
#include <algorithm>

static inline __m512 widen(const uint16_t* p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)p)), 16));
}

template <int CB, int U, int PF>
void gemv(const uint16_t* w, const float* x, float* y, int64_t n, int64_t k, int threads) {
    int64_t blocks = n / CB;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
        __m512 acc[CB][U];
        for (int c = 0; c < CB; ++c) for (int u = 0; u < U; ++u) acc[c][u] = _mm512_setzero_ps();
        const uint16_t* wr = w + b * CB * k;
        for (int64_t k0 = 0; k0 + 16 * U <= k; k0 += 16 * U) {
            __m512 xv[U];
            for (int u = 0; u < U; ++u) xv[u] = _mm512_loadu_ps(x + k0 + 16 * u);
            for (int c = 0; c < CB; ++c) {
                if (PF > 0 && ((k0 & 31) == 0 || U > 1)) _mm_prefetch((const char*)(wr + c * k + k0 + PF), _MM_HINT_T0);
                for (int u = 0; u < U; ++u) acc[c][u] = _mm512_fmadd_ps(xv[u], widen(wr + c * k + k0 + 16 * u), acc[c][u]);
            }
        }
        for (int c = 0; c < CB; ++c) {
            __m512 s = acc[c][0];
            for (int u = 1; u < U; ++u) s = _mm512_add_ps(s, acc[c][u]);
            y[b * CB + c] = _mm512_reduce_add_ps(s);
        }
    }
}

// a plain sum over the same bytes (one pass), for the bandwidth
double sum_bytes(const uint16_t* w, int64_t count, int threads) {
    double total = 0;
#pragma omp parallel for num_threads(threads) reduction(+:total) schedule(static)
    for (int64_t i = 0; i < count; i += 32) {
        __m512i v = _mm512_loadu_si512((const void*)(w + i));
        total += _mm512_reduce_add_epi32(_mm512_madd_epi16(v, _mm512_set1_epi16(1)));
    }
    return total;
}

int main(int argc, char** argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    const int64_t k = argc > 2 ? atoll(argv[2]) : 896, n = argc > 3 ? atoll(argv[3]) : 9728, copies = 40;
    std::vector<std::vector<uint16_t>> ws(copies, std::vector<uint16_t>(n * k));
    for (auto& w : ws) for (auto& v : w) v = 0x3f80 + (rand() & 0x3f);
    std::vector<float> x(k, 0.5f), y(n);
    auto run = [&](const char* name, auto fn) {
        std::vector<double> ts;
        for (int rep = 0; rep < 7; ++rep) {
            auto s = std::chrono::steady_clock::now();
            for (auto& w : ws) fn(w.data());
            ts.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count());
        }
        std::sort(ts.begin(), ts.end());
        printf("%-28s %.1f GB/s\n", name, copies * n * k * 2.0 / ts[3] / 1e9);
    };
    for (int round = 0; round < 2; ++round) {
        run("sum", [&](const uint16_t* w) { volatile double d = sum_bytes(w, n * k, threads); (void)d; });
        run("CB8 U1 PF1024 (current)", [&](const uint16_t* w) { gemv<8, 1, 1024>(w, x.data(), y.data(), n, k, threads); });
        run("CB1 U2 noPF", [&](const uint16_t* w) { gemv<1, 2, 0>(w, x.data(), y.data(), n, k, threads); });
        run("CB1 U4 noPF", [&](const uint16_t* w) { gemv<1, 4, 0>(w, x.data(), y.data(), n, k, threads); });
        run("CB1 U4 PF1024", [&](const uint16_t* w) { gemv<1, 4, 1024>(w, x.data(), y.data(), n, k, threads); });
        run("CB1 U8 noPF", [&](const uint16_t* w) { gemv<1, 8, 0>(w, x.data(), y.data(), n, k, threads); });
        run("CB2 U2 noPF", [&](const uint16_t* w) { gemv<2, 2, 0>(w, x.data(), y.data(), n, k, threads); });
    }
}
