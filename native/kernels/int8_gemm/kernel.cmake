# The int8_gemm kernel(s): ipxc_kernel(NAME ARGS LEVEL...) compiles NAME.cpp once per level listed;
# ipxc_binding() adds bind.cpp to the Python module (native/CMakeLists.txt).
ipxc_kernel(int8_gemm Int8GemmArgs avx2)  # exact u8 x s8 without VNNI (int16 vpmaddwd); from avx512_vnni up oneDNN's int8 runs
ipxc_kernel(int8_amx_gemm Int8GemmArgs amx)  # the same on AMX tiles (tdpbusd), for linear layers
ipxc_binding(int8_gemm)
