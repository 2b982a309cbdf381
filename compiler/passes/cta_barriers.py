"""(being written)"""


def run(module, ctx) -> None:
    """Not implemented yet: leaves the module unchanged."""
