"""Exceptions of the functional API (names as in SlangPy; both are ValueErrors so that callers may catch
either the SlangPy name or the builtin)."""


class ResolveException(ValueError):
    """A call could not be resolved to a Slang overload (arity, names, types)."""


class BoundVariableException(ValueError):
    """An argument could not be marshalled (unsupported Python type, not writable ...)."""

    def __init__(self, message: str, variable=None):
        super().__init__(message)
        self.message = message
        self.variable = variable


class KernelGenException(ValueError):
    """The generated kernel failed to compile."""


class ShapeMismatchError(BoundVariableException, RuntimeError):
    """An array / tensor argument whose element dimensions do not match its parameter ("argument 'x':
    expected last dimension 3 (float3), got 2"); a ValueError, and a RuntimeError as SlangPy raises."""


class AccessError(ResolveException, TypeError):
    """A read-only container for a writable parameter: a ResolveException (SlangPy) and a TypeError."""
