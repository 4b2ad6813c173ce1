# The spatial_mean kernel(s): ipxc_kernel(NAME ARGS LEVEL...) compiles NAME.cpp once per level listed;
# ipxc_binding() adds bind.cpp to the Python module (native/CMakeLists.txt).
ipxc_kernel(spatial_mean SpatialMeanArgs generic avx2 avx512)
ipxc_binding(spatial_mean)
