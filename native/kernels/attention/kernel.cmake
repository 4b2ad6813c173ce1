# The attention kernel(s): ipxc_kernel(NAME ARGS LEVEL...) compiles NAME.cpp once per level listed;
# ipxc_binding() adds bind.cpp to the Python module (native/CMakeLists.txt).
ipxc_kernel(attention AttentionArgs avx512_bf16 amx)  # vdpbf16ps or AMX tile products: below avx512_bf16 the sdpa op runs torch's attention
ipxc_kernel(attention_f32 AttentionArgs avx2 avx512)  # fp32 FMA products: at generic fp32 sdpa runs torch's attention
ipxc_binding(attention)
