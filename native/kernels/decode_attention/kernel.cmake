# The decode_attention kernel(s): ipxc_kernel(NAME ARGS LEVEL...) compiles NAME.cpp once per level listed;
# ipxc_binding() adds bind.cpp to the Python module (native/CMakeLists.txt).
ipxc_kernel(decode_attention DecodeAttentionArgs generic avx2 avx512)
ipxc_binding(decode_attention)
