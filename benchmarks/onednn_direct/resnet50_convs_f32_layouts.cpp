// ResNet-50's convolutions in fp32: nhwc vs nChw16c activations, one process, interleaved rounds.
#include <dnnl.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <unordered_map>
#include <vector>
using namespace dnnl; using tag = memory::format_tag; using dt = memory::data_type;
struct Layer { convolution_forward prim; std::unordered_map<int, memory> args; std::string impl; };
Layer make(engine& eng, tag t, int N, int ic, int oc, int ih, int iw, int oh, int ow, int kh, int kw, int sh, int sw, int ph, int pw) {
    auto src_md = memory::desc({N, ic, ih, iw}, dt::f32, t), dst_md = memory::desc({N, oc, oh, ow}, dt::f32, t);
    auto wei_md = memory::desc({oc, ic, kh, kw}, dt::f32, tag::any);
    primitive_attr attr; attr.set_scratchpad_mode(scratchpad_mode::user);
    post_ops po; po.append_eltwise(algorithm::eltwise_relu, 0.f, 0.f); attr.set_post_ops(po);
    auto pd = convolution_forward::primitive_desc(eng, prop_kind::forward_inference, algorithm::convolution_direct, src_md, wei_md,
        memory::desc({oc}, dt::f32, tag::x), dst_md, {sh, sw}, {ph, pw}, {ph, pw}, attr);
    Layer L{convolution_forward(pd), {}, pd.impl_info_str()};
    L.args[DNNL_ARG_SRC] = memory(src_md, eng); L.args[DNNL_ARG_DST] = memory(dst_md, eng);
    L.args[DNNL_ARG_WEIGHTS] = memory(pd.weights_desc(), eng); L.args[DNNL_ARG_BIAS] = memory(pd.bias_desc(), eng);
    L.args[DNNL_ARG_SCRATCHPAD] = memory(pd.scratchpad_desc(), eng);
    for (auto& kv : L.args) { auto m = kv.second; size_t n = m.get_desc().get_size() / 4; float* p = (float*)m.get_data_handle();
        for (size_t i = 0; i < n; ++i) p[i] = ((i * 2654435761u) >> 24) / 256.f - 0.5f; }
    return L;
}
int main(int argc, char** argv) {
    int N = argc > 1 ? atoi(argv[1]) : 1, rounds = argc > 3 ? atoi(argv[3]) : 30;
    engine eng(engine::kind::cpu, 0); stream s(eng);
    std::ifstream f(argc > 2 ? argv[2] : "resnet50_convs.txt");
    std::vector<Layer> a, b; std::vector<std::string> shape;
    int ic, oc, ih, iw, oh, ow, kh, kw, sh, sw, ph, pw;
    while (f >> ic >> oc >> ih >> iw >> oh >> ow >> kh >> kw >> sh >> sw >> ph >> pw) {
        tag blocked = (ic % 16 == 0) ? tag::nChw16c : tag::nhwc;
        a.push_back(make(eng, tag::nhwc, N, ic, oc, ih, iw, oh, ow, kh, kw, sh, sw, ph, pw));
        b.push_back(make(eng, blocked, N, ic, oc, ih, iw, oh, ow, kh, kw, sh, sw, ph, pw));
        char buf[128]; snprintf(buf, sizeof buf, "%dx%d %4d->%4d %3dx%-3d s%d", kh, kw, ic, oc, ih, iw, sh); shape.push_back(buf);
    }
    size_t n = a.size();
    std::vector<std::vector<double>> ta(n), tb(n);
    auto time1 = [&](Layer& L) { auto t0 = std::chrono::steady_clock::now(); L.prim.execute(s, L.args); s.wait();
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(); };
    for (int w = 0; w < 3; ++w) for (size_t i = 0; i < n; ++i) { time1(a[i]); time1(b[i]); }
    for (int r = 0; r < rounds; ++r) for (size_t i = 0; i < n; ++i) {
        if (r % 2) { ta[i].push_back(time1(a[i])); tb[i].push_back(time1(b[i])); }
        else { tb[i].push_back(time1(b[i])); ta[i].push_back(time1(a[i])); } }
    auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
    double sa = 0, sb = 0, sa3 = 0, sb3 = 0;
    for (size_t i = 0; i < n; ++i) { double x = med(ta[i]), y = med(tb[i]); sa += x; sb += y;
        if (shape[i][0] == '3') { sa3 += x; sb3 += y; }
        printf("%-28s nhwc %.3f  blocked %.3f  %.2fx  [%s | %s]\n", shape[i].c_str(), x, y, y / x, a[i].impl.c_str(), b[i].impl.c_str()); }
    printf("batch %d: all convs nhwc %.2f ms, blocked %.2f ms (%.3fx); 3x3 only %.2f vs %.2f (%.3fx)\n", N, sa, sb, sb / sa, sa3, sb3, sb3 / sa3);
}
