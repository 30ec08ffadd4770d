"""Hooks through which a later stage takes part in functional calls without this layer importing it.

`slangjit.torch` registers one: a call whose arguments include a torch tensor is handed to it (it wraps
the tensors as zero-copy Tensors, runs the call through this layer and returns torch tensors, making the
call an autograd node when needed).  A hook is chosen by the type of an argument (top-level or a value
of a dict argument); `claims(type) -> bool` is asked once per type and the answer cached, so a call with
no foreign argument pays one dict lookup per argument.
"""
from __future__ import annotations

from typing import Callable, Optional

from .values import DiffPair

_HOOKS: list = []            # (claims, handler)
_BY_TYPE: dict = {}          # type -> handler or None
_UNSEEN = object()
_DICT = object()
_PAIR = object()
_PLAIN = frozenset((int, float, bool, str, type(None)))


def register_call_hook(claims: Callable[[type], bool], handler: Callable) -> None:
    """Route calls with an argument whose type `claims` accepts to `handler(node, args, kwargs)`."""
    _HOOKS.append((claims, handler))
    _reset()


def _reset() -> None:
    _BY_TYPE.clear()
    _BY_TYPE[dict] = _DICT          # a dict argument (a struct's fields): its values are looked at
    _BY_TYPE[DiffPair] = _PAIR      # a diff_pair (of tensors, for a DiffTensorView): its primal and gradient


def replace_call_hook(old: Callable, new: Callable) -> None:
    """Swap a registered handler (a lazy loader replacing itself with the real one)."""
    for i, (c, h) in enumerate(_HOOKS):
        if h is old:
            _HOOKS[i] = (c, new)
    _reset()


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


def _scan(values, get) -> Optional[Callable]:
    for a in values:
        h = get(type(a), _UNSEEN)
        if h is None:
            continue
        if h is _UNSEEN:
            h = _handler_of(type(a))
            if h is None:
                continue
        if h is _DICT:
            h = _scan(a.values(), get)
            if h is None:
                continue
        elif h is _PAIR:
            h = _scan((a.primal, a.grad), get)
            if h is None:
                continue
        return h
    return None


def find_call_hook(args: tuple, kwargs: dict) -> Optional[Callable]:
    """The handler of the first argument some hook claims (top level or a value of a dict argument), or None."""
    if not _HOOKS:
        return None
    get = _BY_TYPE.get
    h = _scan(args, get) if args else None
    if h is None and kwargs:
        h = _scan(kwargs.values(), get)
    return h
