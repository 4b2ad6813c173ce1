"""The device-neutral runtime: the loaded model (model.py), the plan and its loop (executor.py) and the
kernel registry (kernels.py) that backends fill (backends/)."""
