# The bf16_amx_gemm kernel: ipxc_kernel(NAME ARGS LEVEL...) compiles NAME.cpp once per level listed;
# ipxc_binding() adds bind.cpp to the Python module (native/CMakeLists.txt).
ipxc_kernel(bf16_amx_gemm Bf16AmxGemmArgs amx)  # AMX tiles only: below amx the bf16 linear runs oneDNN's or ours from storage
ipxc_binding(bf16_amx_gemm)
