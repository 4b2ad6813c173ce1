// ResNet-50's 53 convolutions (shapes from ONEDNN_VERBOSE of our int8 artifact, resnet50_convs.txt:
// ic oc ih iw oh ow kh kw sh sw ph pw), each a oneDNN primitive created once with its own
// pseudo-random weights and buffers, executed in sequence; median of 30 inferences. See run.sh.
#include <dnnl.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>
#include <array>
#include <unordered_map>
using namespace dnnl; using tag = memory::format_tag; using dt = memory::data_type;
struct Layer { convolution_forward prim; std::unordered_map<int, memory> args; };
int main(int argc, char** argv) {
    bool u8 = argc > 1 && std::string(argv[1]) == "u8";
    int N = argc > 2 ? atoi(argv[2]) : 1;
    engine eng(engine::kind::cpu, 0); stream s(eng);
    std::ifstream f(argc > 3 ? argv[3] : "resnet50_convs.txt"); std::vector<Layer> layers;
    int ic, oc, ih, iw, oh, ow, kh, kw, sh, sw, ph, pw;
    dt a = u8 ? dt::u8 : dt::bf16, w = u8 ? dt::s8 : dt::bf16;
    while (f >> ic >> oc >> ih >> iw >> oh >> ow >> kh >> kw >> sh >> sw >> ph >> pw) {
        auto src_md = memory::desc({N, ic, ih, iw}, a, tag::nhwc), dst_md = memory::desc({N, oc, oh, ow}, a, tag::nhwc);
        auto wei_md = memory::desc({oc, ic, kh, kw}, w, tag::any);
        primitive_attr attr; attr.set_scratchpad_mode(scratchpad_mode::user);
        if (u8) { attr.set_scales_mask(DNNL_ARG_SRC, 0); attr.set_scales_mask(DNNL_ARG_WEIGHTS, 1); attr.set_scales_mask(DNNL_ARG_DST, 0); attr.set_zero_points_mask(DNNL_ARG_DST, 0); }
        post_ops po; po.append_eltwise(algorithm::eltwise_relu, 0.f, 0.f); attr.set_post_ops(po);
        auto pd = convolution_forward::primitive_desc(eng, prop_kind::forward_inference, algorithm::convolution_direct, src_md, wei_md,
            memory::desc({oc}, dt::f32, tag::x), dst_md, {sh, sw}, {ph, pw}, {ph, pw}, attr);
        Layer L{convolution_forward(pd), {}};
        L.args[DNNL_ARG_SRC] = memory(src_md, eng); L.args[DNNL_ARG_DST] = memory(dst_md, eng);
        L.args[DNNL_ARG_WEIGHTS] = memory(pd.weights_desc(), eng); L.args[DNNL_ARG_BIAS] = memory(pd.bias_desc(), eng);
        L.args[DNNL_ARG_SCRATCHPAD] = memory(pd.scratchpad_desc(), eng);
        if (u8) {
            memory a1({{1}, dt::f32, tag::x}, eng), a2({{oc}, dt::f32, tag::x}, eng), a3({{1}, dt::f32, tag::x}, eng), z({{1}, dt::s32, tag::x}, eng);
            ((float*)a1.get_data_handle())[0] = .02f; for (int i = 0; i < oc; ++i) ((float*)a2.get_data_handle())[i] = .01f;
            ((float*)a3.get_data_handle())[0] = .05f; ((int*)z.get_data_handle())[0] = 0;
            L.args[DNNL_ARG_ATTR_SCALES | DNNL_ARG_SRC] = a1; L.args[DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS] = a2;
            L.args[DNNL_ARG_ATTR_SCALES | DNNL_ARG_DST] = a3; L.args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST] = z;
        }
        for (auto& kv : L.args) { auto m = kv.second; size_t n = m.get_desc().get_size(); unsigned char* p = (unsigned char*)m.get_data_handle();
            if (kv.first & DNNL_ARG_ATTR_SCALES || kv.first & DNNL_ARG_ATTR_ZERO_POINTS) continue;
            for (size_t i = 0; i < n; ++i) p[i] = (unsigned char)((i * 2654435761u) >> 24) & (u8 ? 0xff : 0x3f); }
        layers.push_back(L);
    }
    auto run = [&] { for (auto& L : layers) L.prim.execute(s, L.args); s.wait(); };
    for (int i = 0; i < 5; ++i) run();
    std::vector<double> t;
    for (int r = 0; r < 30; ++r) { auto t0 = std::chrono::steady_clock::now(); run(); t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()); }
    std::sort(t.begin(), t.end());
    printf("%s batch %d: %zu convs, median %.2f ms per inference\n", u8 ? "u8" : "bf16", N, layers.size(), t[t.size() / 2]);
}
