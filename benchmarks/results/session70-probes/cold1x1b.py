import sys, torch, statistics
sys.path.insert(0, "benchmarks"); sys.path.insert(0, ".")
from timing import interleaved_us
from ipexconvert.backends.cpu import onednn_direct as dnnl
from ipexconvert.backends.cpu import malloc
malloc.keep_freed_memory()
torch.set_num_threads(2)
for c, hw, oc in [(1024, 14, 256), (256, 14, 1024), (2048, 7, 512), (512, 7, 2048), (64, 56, 256), (512, 28, 128)]:
    g = torch.Generator().manual_seed(0)
    n = max(2, int(64e6 / (c*oc*4)))
    ws = [torch.randn(oc, c, 1, 1, generator=g) * 0.05 for _ in range(n)]
    b = torch.randn(oc, generator=g)
    mk = lambda how: [dnnl.raw.Conv(w, bias=b, stride=(1,1), padding=(0,0), dilation=(1,1), relu=True, lowering=how, w_scales=None, src="float32", dst="float32") for w in ws]
    cv, mm = mk("convolution"), mk("matmul")
    xs = [torch.randn(1, c, hw, hw, generator=g).contiguous(memory_format=torch.channels_last) for _ in range(64)]
    outs = [torch.empty(1, oc, hw, hw).contiguous(memory_format=torch.channels_last) for _ in range(64)]
    it = {"conv": 0, "matmul": 0}
    def run(name, lst):
        def f():
            it[name] += 1; i = it[name] % 64; lst[it[name] % n].run(xs[i], outs[i])
        return f
    t = interleaved_us({"conv": run("conv", cv), "matmul": run("matmul", mm)}, 9, 40)
    mac = hw * hw * c * oc
    print(f"{c}->{oc} @{hw} cold: " + ", ".join(f"{k} {v:.0f} us ({mac / v / 1e3:.0f} GMAC/s)" for k, v in t.items()), "impl:", cv[0].implementation(1, hw, hw) if hasattr(cv[0], "implementation") else "", mm[0].implementation(1, hw, hw) if hasattr(mm[0], "implementation") else "")
