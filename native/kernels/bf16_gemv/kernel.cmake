# The bf16 linear kernels: ipxc_kernel(NAME ARGS LEVEL...) compiles NAME.cpp once per level listed;
# ipxc_binding() adds bind.cpp to the Python module (native/CMakeLists.txt).
ipxc_kernel(bf16_gemv Bf16GemvArgs generic avx2 avx512)  # a few rows (decode): bound by reading the weight
ipxc_kernel(bf16_gemm Bf16GemvArgs generic avx2 avx512)  # many rows (a prompt): FMAs on widened panels
ipxc_binding(bf16_gemv)
