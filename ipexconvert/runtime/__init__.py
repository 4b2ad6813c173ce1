from . import cpu_kernels  # noqa: F401  (registers the native CPU kernels ahead of the references)
