# The woq_gemm kernel: ipxc_kernel(NAME ARGS LEVEL...) compiles NAME.cpp once per level listed;
# ipxc_binding() adds bind.cpp to the Python module (native/CMakeLists.txt).
ipxc_kernel(woq_gemm WoqGemmArgs generic avx2 avx512)  # the levels above run the avx512 build
ipxc_kernel(woq_gemv_i8 WoqGemmArgs avx2)  # path 3: int8 activations, vpmaddubsw (AVX2; the levels above run it too)
ipxc_kernel(woq_gemm_w8a8 WoqGemmArgs avx2 avx512_vnni amx)  # path 4: int8 weights x int8 activations (sign trick / vpdpbusd / AMX tdpbusd prefill)
ipxc_kernel(woq_gemm_w4a8 WoqGemmArgs avx512_vnni amx)  # path 5: 4-bit weights in k-octets x int8 activations (vpdpbusd / AMX tdpbusd prefill)
ipxc_binding(woq_gemm)
