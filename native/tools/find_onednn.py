"""Prints "<include dir>;<libdnnl.so.3 path>" of the installed oneDNN wheels, or nothing when they are missing.

The build links the direct oneDNN layers (ipexconvert._dnnl) against onednn-cpu-gomp, the CPU-only
oneDNN built for GNU OpenMP (the runtime torch uses), with headers from onednn-devel-cpu-gomp.
Wheels put them in the environment's data directory (<prefix>/include, <prefix>/lib), which the
installed-files list of each distribution locates. Arguments: more folders to search (CMake
passes CMAKE_PREFIX_PATH, where scikit-build-core lists the site-packages of pip's isolated build
environment, which a child Python does not see by itself).
"""
import importlib.metadata as metadata
import sys


def locate(distribution: str, suffix: str):
    try:
        files = metadata.distribution(distribution).files or []
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if str(f).replace("\\", "/").endswith(suffix):
            return metadata.distribution(distribution).locate_file(f).resolve()
    return None


sys.path[:0] = [p for arg in sys.argv[1:] for p in arg.split(";") if p]
header = locate("onednn-devel-cpu-gomp", "include/dnnl.hpp")
library = locate("onednn-cpu-gomp", "/libdnnl.so.3")
if header and library and header.exists() and library.exists():
    sys.stdout.write(f"{header.parent};{library}")
