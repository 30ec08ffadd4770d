"""Hooks through which a later stage takes part in functional calls without this layer importing it.

`slangjit.torch` registers one: a call whose arguments include a torch tensor is handed to it (it wraps
the tensors as zero-copy Tensors, runs the call through this layer and returns torch tensors, making the
call an autograd node when needed).  A hook is chosen by the type of an argument (top-level or a value
of a dict argument); `claims(type) -> bool` is asked once per type and the answer cached, so a call with
no foreign argument pays one dict lookup per argument.
"""
from __future__ import annotations

from typing import Callable, Optional

_HOOKS: list = []            # (claims, handler)
_BY_TYPE: dict = {}          # type -> handler or None
_UNSEEN = object()
_PLAIN = frozenset((int, float, bool, str, type(None)))


def register_call_hook(claims: Callable[[type], bool], handler: Callable) -> None:
    """Route calls with an argument whose type `claims` accepts to `handler(node, args, kwargs)`."""
    _HOOKS.append((claims, handler))
    _BY_TYPE.clear()


def replace_call_hook(old: Callable, new: Callable) -> None:
    """Swap a registered handler (a lazy loader replacing itself with the real one)."""
    for i, (c, h) in enumerate(_HOOKS):
        if h is old:
            _HOOKS[i] = (c, new)
    _BY_TYPE.clear()


def _handler_of(tp) -> Optional[Callable]:
    h = _BY_TYPE.get(tp, _UNSEEN)
    if h is not _UNSEEN:
        return h
    h = None
    if tp not in _PLAIN:
        for claims, handler in _HOOKS:
            if claims(tp):
                h = handler
                break
    if len(_BY_TYPE) < 4096:
        _BY_TYPE[tp] = h
    return h


def find_call_hook(args: tuple, kwargs: dict) -> Optional[Callable]:
    """The handler of the first argument some hook claims, or None."""
    if not _HOOKS:
        return None
    for a in args:
        h = _handler_of(type(a))
        if h is not None:
            return h
        if type(a) is dict:
            for v in a.values():
                h = _handler_of(type(v))
                if h is not None:
                    return h
    if kwargs:
        for a in kwargs.values():
            h = _handler_of(type(a))
            if h is not None:
                return h
            if type(a) is dict:
                for v in a.values():
                    h = _handler_of(type(v))
                    if h is not None:
                        return h
    return None
