# The bf16 attention kernel (AMX) against the float32 one (unchanged, a reference for this process's speed):
# interleaved calls at BERT-base shapes, medians; prints amx / f32 per shape.
import sys, time, torch
from ipexconvert.backends.cpu import native_lib
lib = native_lib.raw
th = int(sys.argv[1]); torch.set_num_threads(th)
H, D = 12, 64
out_s = []
for B, sq in ((1, 128), (8, 128), (1, 384)):
    mk = lambda dt: (torch.randn(B, sq, 3 * H * D).to(dt))
    ab = mk(torch.bfloat16); af = ab.float()
    def views(t):
        q, k, v = [z.view(B, sq, H, D).transpose(1, 2) for z in t.split(H * D, -1)]
        return q, k, v, torch.zeros(B, 1, 1, sq), torch.empty(B, sq, H, D, dtype=t.dtype).permute(0, 2, 1, 3)
    vb, vf = views(ab), views(af)
    fs = {"amx": lambda: lib.attention(*vb, 1 / 8, "amx", th), "f32": lambda: lib.attention(*vf, 1 / 8, "avx512", th)}
    res = {k: [] for k in fs}
    n = max(2, 100 // (B * sq // 16))
    for r in range(30):
        for k, f in fs.items():
            f()
            t0 = time.perf_counter()
            for _ in range(n): f()
            res[k].append((time.perf_counter() - t0) / n)
    med = {k: sorted(v)[len(v) // 2] * 1e6 for k, v in res.items()}
    out_s.append(f"b{B}q{sq} {med['amx']:.0f}/{med['f32']:.0f}us={med['amx']/med['f32']:.3f}")
print(" | ".join(out_s))
