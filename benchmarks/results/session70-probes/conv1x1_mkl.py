import sys, torch, statistics
sys.path.insert(0, "benchmarks")
from timing import interleaved_us
from ipexconvert.backends.cpu import onednn_direct as dnnl
from ipexconvert.backends.cpu import malloc
malloc.keep_freed_memory()
torch.set_num_threads(2)
# resnet50 1x1 convs at b1: (in, hw, out, stride)
SH = [(64,56,64),(64,56,256),(256,56,64),(256,28,128),(128,28,512),(512,28,128),(512,14,256),(256,14,1024),(1024,14,256),(1024,7,512),(512,7,2048),(2048,7,512)]
batch = int(sys.argv[1]) if len(sys.argv) > 1 else 1
tot = {"onednn": 0, "mkl": 0, "mkl_norelu": 0}
for c, hw, oc in SH:
    g = torch.Generator().manual_seed(0)
    w = torch.randn(oc, c, 1, 1, generator=g) * 0.05
    b = torch.randn(oc, generator=g)
    conv = dnnl.raw.Conv(w, bias=b, stride=(1,1), padding=(0,0), dilation=(1,1), relu=True, lowering="convolution", w_scales=None, src="float32", dst="float32")
    rows = batch*hw*hw
    xs = [torch.randn(batch, c, hw, hw, generator=g).contiguous(memory_format=torch.channels_last) for _ in range(4)]
    a = torch.empty(batch, oc, hw, hw).contiguous(memory_format=torch.channels_last)
    wp = torch.ops.mkl._mkl_reorder_linear_weight(w.view(oc, c), rows)
    it = [0]
    def f_dnnl():
        it[0] = (it[0]+1) % 4
        conv.run(xs[it[0]], a)
    def f_mkl():
        it[0] = (it[0]+1) % 4
        y = torch.ops.mkl._mkl_linear(xs[it[0]].permute(0,2,3,1).reshape(rows, c), wp, w.view(oc,c), b, rows)
        y.relu_()
    def f_mkl2():
        it[0] = (it[0]+1) % 4
        y = torch.ops.mkl._mkl_linear(xs[it[0]].permute(0,2,3,1).reshape(rows, c), wp, w.view(oc,c), b, rows)
    conv.run(xs[0], a)
    y = torch.ops.mkl._mkl_linear(xs[0].permute(0,2,3,1).reshape(rows, c), wp, w.view(oc,c), b, rows).relu_()
    d = (a.permute(0,2,3,1).reshape(rows, oc) - y).abs().max().item()
    t = interleaved_us({"onednn": f_dnnl, "mkl": f_mkl, "mkl_norelu": f_mkl2}, 9, 20)
    macs = rows*c*oc
    for k in t: tot[k] += t[k]
    print(f"{c:5d} {hw:3d} {oc:5d} onednn {t['onednn']:8.1f} us ({macs/t['onednn']/1e3:6.1f} GMAC/s)  mkl {t['mkl']:8.1f} ({macs/t['mkl']/1e3:6.1f})  mkl-norelu {t['mkl_norelu']:8.1f}  diff {d:.2g}")
print(tot)
