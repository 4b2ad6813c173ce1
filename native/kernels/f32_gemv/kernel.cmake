# The float32 decode GEMV: ipxc_kernel(NAME ARGS LEVEL...) compiles NAME.cpp once per level listed;
# ipxc_binding() adds bind.cpp to the Python module (native/CMakeLists.txt).
ipxc_kernel(f32_gemv F32GemvArgs generic avx2 avx512)  # a few rows (decode): bound by reading the weight
ipxc_binding(f32_gemv)
