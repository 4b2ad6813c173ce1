import sys, torch, statistics, os
sys.path.insert(0, "benchmarks"); sys.path.insert(0, ".")
from timing import interleaved_samples
from ipexconvert.backends.cpu import native_lib
lib = native_lib.raw
torch.set_num_threads(2)
level = "avx512_vnni"
for m, n, k in [(128, 2304, 768), (128, 768, 768), (128, 3072, 768), (128, 768, 3072), (1024, 3072, 768)]:
    x = torch.randn(m, k).bfloat16(); x32 = x.float()
    w32s = [torch.randn(n, k) for _ in range(4)]
    ws = [w.bfloat16() for w in w32s]
    out = torch.empty(m, n, dtype=torch.bfloat16)
    packs = [torch.ops.mkl._mkl_reorder_linear_weight(w, m) for w in w32s]
    it = [0, 0, 0]
    def mkl():
        it[0] = (it[0] + 1) % 4; torch.ops.mkl._mkl_linear(x32, packs[it[0]], w32s[it[0]], None, m)
    def ours():
        it[1] = (it[1] + 1) % 4; lib.bf16_gemm(x, ws[it[1]], None, out, level, 2)
    def nofill():
        os.environ["X_NOFILL"] = "1"
        it[2] = (it[2] + 1) % 4; lib.bf16_gemm(x, ws[it[2]], None, out, level, 2)
        del os.environ["X_NOFILL"]
    s = interleaved_samples({"mkl": mkl, "ours": ours, "nofill": nofill}, 9, 20)
    mac = m * n * k
    print(f"{m}x{n}x{k}: " + ", ".join(f"{name} {statistics.median(v)*1e6:.0f} us {mac/statistics.median(v)/1e9:.0f} GMAC/s" for name, v in s.items()))
