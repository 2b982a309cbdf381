"""Example kernels written in the tlx DSL (importable as tlx.examples)."""
