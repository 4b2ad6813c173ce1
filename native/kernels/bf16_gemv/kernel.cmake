# The bf16_gemv kernel(s): ipxc_kernel(NAME ARGS LEVEL...) compiles NAME.cpp once per level listed;
# ipxc_binding() adds bind.cpp to the Python module (native/CMakeLists.txt).
ipxc_kernel(bf16_gemv Bf16GemvArgs generic avx2 avx512)
ipxc_binding(bf16_gemv)
