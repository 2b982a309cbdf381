"""tlx.runtime: load and launch PTX through numba.cuda's driver API; TMA descriptors; the compile cache."""
