"""tlx.compiler: the IR, the pass pipeline and PTX code generation. Imports neither the frontend
(tlx) nor the runtime."""

from .accelerate import install_finder

# before any hot module loads: their compiled copies, where pip install built them (accelerate.py)
install_finder()
