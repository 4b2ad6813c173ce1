import sys, torch, statistics
sys.path.insert(0, "benchmarks"); sys.path.insert(0, ".")
from timing import interleaved_us
from ipexconvert.backends.cpu import onednn_direct as dnnl
from ipexconvert.backends.cpu import malloc
malloc.keep_freed_memory()
torch.set_num_threads(2)
for c, hw, oc in [(1024, 14, 256), (256, 14, 1024), (2048, 7, 512), (64, 56, 256)]:
    g = torch.Generator().manual_seed(0)
    convs = [dnnl.raw.Conv(torch.randn(oc, c, 1, 1, generator=g) * 0.05, bias=torch.randn(oc, generator=g), stride=(1,1), padding=(0,0), dilation=(1,1), relu=True, lowering="convolution", w_scales=None, src="float32", dst="float32") for _ in range(max(2, int(64e6 / (c*oc*4))))]
    xs = [torch.randn(1, c, hw, hw, generator=g).contiguous(memory_format=torch.channels_last) for _ in range(64)]
    outs = [torch.empty(1, oc, hw, hw).contiguous(memory_format=torch.channels_last) for _ in range(64)]
    junk = torch.empty(16 * 2**20 // 4)
    it = {"hot": 0, "coldw": 0, "coldx": 0, "cold": 0}
    def hot(): convs[0].run(xs[0], outs[0])
    def coldw():
        it["coldw"] += 1; convs[it["coldw"] % len(convs)].run(xs[0], outs[0])
    def coldx():
        it["coldx"] += 1; i = it["coldx"] % 64; convs[0].run(xs[i], outs[i])
    def cold():
        it["cold"] += 1; i = it["cold"] % 64; convs[it["cold"] % len(convs)].run(xs[i], outs[i])
    t = interleaved_us({"hot": hot, "coldw": coldw, "coldx": coldx, "cold": cold}, 9, 40)
    mac = hw * hw * c * oc
    print(f"{c}->{oc} @{hw}: " + ", ".join(f"{k} {v:.0f} us ({mac / v / 1e3:.0f} GMAC/s)" for k, v in t.items()), len(convs), "weight copies")
