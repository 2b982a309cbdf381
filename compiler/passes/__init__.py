"""The pass pipeline: one module per pass, each with its rule in its docstring."""
