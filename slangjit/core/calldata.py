"""SlangPy's `slangpy.core.calldata` entry points: `set_print_generated_shaders(True)` prints the Slang
kernel the functional API generates for each new call signature."""
from __future__ import annotations

from ..functional.calldata import is_print_generated_shaders, set_print_generated_shaders

__all__ = ["set_print_generated_shaders", "is_print_generated_shaders"]
