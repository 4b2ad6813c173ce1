# The rope kernel(s): ipxc_kernel(NAME ARGS LEVEL...) compiles NAME.cpp once per level listed;
# ipxc_binding() adds bind.cpp to the Python module (native/CMakeLists.txt).
ipxc_kernel(rope RopeArgs generic avx2 avx512 avx512_bf16)
ipxc_kernel(rope_kv_append RopeKvAppendArgs generic avx2 avx512 avx512_bf16)
ipxc_binding(rope)
