"""INT8 quantization: calibration, observers, SmoothQuant, accuracy guard."""
