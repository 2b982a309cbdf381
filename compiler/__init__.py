"""tlx.compiler: the IR, the pass pipeline and PTX code generation. Imports neither the frontend
(tlx) nor the runtime."""
