"""The compiler's passes, one module per pass (rule in each docstring); `compiler.pipeline` runs them."""
