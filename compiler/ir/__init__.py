"""The tlx IR: types, layouts, ops, printer, parser and verifier."""

from . import layouts, types
from .core import (Block, BlockArgument, BlockOps, Builder, Location, Module, OpResult, Operation, Region,
                   UNKNOWN_LOC, Value, preorder)
from .ops import OPS, Effect, effects_of, get_opdef, is_pure
from .parser import parse_module, parse_type
from .printer import print_module, print_op
from .verifier import verify_module

__all__ = [
    "Block", "BlockArgument", "BlockOps", "Builder", "Location", "Module", "OpResult", "Operation", "Region",
    "UNKNOWN_LOC", "Value", "preorder", "OPS", "Effect", "effects_of", "get_opdef", "is_pure", "parse_module",
    "parse_type", "print_module", "print_op", "verify_module", "layouts", "types",
]
