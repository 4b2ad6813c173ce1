# The concat_channels kernel(s): ipxc_kernel(NAME ARGS LEVEL...) compiles NAME.cpp once per level listed;
# ipxc_binding() adds bind.cpp to the Python module (native/CMakeLists.txt).
ipxc_kernel(concat_channels ConcatChannelsArgs generic)  # copies only: glibc's memcpy picks its own vector width
ipxc_binding(concat_channels)
