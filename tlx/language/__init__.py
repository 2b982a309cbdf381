"""import tlx.language as tl: the Triton core language subset."""
