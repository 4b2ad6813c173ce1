# The quantize_last_axis kernel(s): ipxc_kernel(NAME ARGS LEVEL...) compiles NAME.cpp once per level listed;
# ipxc_binding() adds bind.cpp to the Python module (native/CMakeLists.txt).
ipxc_kernel(quantize_last_axis QuantizeLastAxisArgs generic avx2 avx512)
# Rounds like the quantize op's reference only with explicit control over where it fuses multiply-add.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/quantize_last_axis.cpp PROPERTIES COMPILE_OPTIONS -ffp-contract=off)
ipxc_binding(quantize_last_axis)
