import sys, torch, statistics
sys.path.insert(0, "benchmarks"); sys.path.insert(0, ".")
from timing import interleaved_us
from ipexconvert.backends.cpu import onednn_direct as dnnl
from ipexconvert.backends.cpu import malloc
from ipexconvert.backends.cpu import native_lib
lib = native_lib.raw
malloc.keep_freed_memory()
torch.set_num_threads(2)
for c, hw, oc in [(2048, 7, 512), (512, 7, 2048), (1024, 14, 256)]:
    g = torch.Generator().manual_seed(0)
    n = max(2, int(64e6 / (c*oc*4)))
    rows = hw * hw
    ws = [torch.randn(oc, c, generator=g) * 0.05 for _ in range(n)]
    b = torch.randn(oc, generator=g)
    cv = [dnnl.raw.Conv(w.view(oc, c, 1, 1), bias=b, stride=(1,1), padding=(0,0), dilation=(1,1), relu=True, lowering="convolution", w_scales=None, src="float32", dst="float32") for w in ws]
    packs = [torch.ops.mkl._mkl_reorder_linear_weight(w, rows) for w in ws]
    wbf = [w.bfloat16() for w in ws]
    xs = [torch.randn(1, c, hw, hw, generator=g).contiguous(memory_format=torch.channels_last) for _ in range(64)]
    outs = [torch.empty(1, oc, hw, hw).contiguous(memory_format=torch.channels_last) for _ in range(64)]
    it = {"conv": 0, "mkl": 0, "f32gemv": 0}
    def conv():
        it["conv"] += 1; i = it["conv"] % 64; cv[it["conv"] % n].run(xs[i], outs[i])
    def mkl():
        it["mkl"] += 1; i = it["mkl"] % 64; j = it["mkl"] % n
        torch.ops.mkl._mkl_linear(xs[i].permute(0, 2, 3, 1).reshape(rows, c), packs[j], ws[j], b, rows).relu_()
    t = interleaved_us({"conv": conv, "mkl": mkl}, 9, 40)
    mac = rows * c * oc
    print(f"{c}->{oc} @{hw} cold: " + ", ".join(f"{k} {v:.0f} us ({mac / v / 1e3:.0f} GMAC/s, {c*oc*4/v/1e3:.1f} GB/s)" for k, v in t.items()))
