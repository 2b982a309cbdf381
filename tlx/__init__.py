"""tlx: write NVIDIA Hopper kernels in Python, TLX-style."""
