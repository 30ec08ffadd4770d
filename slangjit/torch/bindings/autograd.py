"""Autograd without boilerplate: one line turns a differentiable bound kernel into a torch function.

    square = autograd_function(m.square, outputs={"output": lambda input: torch.empty_like(input)},
                               blockSize=(256, 1, 1), gridSize=lambda input: ((input.numel() + 255) // 256, 1, 1))
    y = square(input=x)              # y.backward(...) fills x.grad through m.square.bwd

`outputs` names the kernel's output parameters, each with a function of the inputs (by keyword) that
allocates it (or a tensor-like shape source); every other parameter is an input passed by keyword.
`blockSize` / `gridSize` are 3-tuples or functions of the inputs.  The forward launch writes the outputs;
the backward launch gets zero gradient buffers for the tensor inputs and a copy of each output's
incoming gradient (the backward of a store reads and zeroes it, so torch's own buffer is never touched)."""
from __future__ import annotations

from . import marshal as M


def _resolve(spec, inputs: dict):
    return spec(**inputs) if callable(spec) else spec


def autograd_function(kernel, outputs, blockSize, gridSize):
    """A function of the kernel's input parameters (keywords) returning its outputs (one tensor, or a
    tuple in the order of `outputs`), differentiable through `kernel.bwd`."""
    if not hasattr(kernel, "bwd") or not hasattr(kernel, "_kinfo"):
        raise TypeError("autograd_function: expected a bound kernel (m.name), got " + type(kernel).__name__)
    if not kernel._kinfo.bind_bwd:
        raise ValueError(f"autograd_function: kernel '{kernel._kinfo.name}' has no backward derivative "
                         "(mark it [Differentiable])")
    if isinstance(outputs, (list, tuple)):
        outputs = {n: None for n in outputs}
    names = kernel._names
    for o in outputs:
        if o not in names:
            raise ValueError(f"autograd_function: '{o}' is not a parameter of '{kernel._kinfo.name}' "
                             f"({', '.join(names)})")
    in_names = [n for n in names if n not in outputs]
    out_names = list(outputs)
    torch = M._torch()

    class _Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *flat):
            inputs = dict(zip(in_names, flat))
            outs = {}
            for n, spec in outputs.items():
                first = next((v for v in flat if isinstance(v, torch.Tensor)), None)
                o = spec(**inputs) if callable(spec) else torch.zeros_like(first if spec is None else spec)
                outs[n] = o
            bs, gs = _resolve(blockSize, inputs), _resolve(gridSize, inputs)
            kernel(**inputs, **outs).launchRaw(blockSize=bs, gridSize=gs)
            ctx.bs, ctx.gs = bs, gs
            tensors = [v for v in flat if isinstance(v, torch.Tensor)]
            ctx.tensor_pos = [i for i, v in enumerate(flat) if isinstance(v, torch.Tensor)]
            ctx.others = [None if isinstance(v, torch.Tensor) else v for v in flat]
            ctx.save_for_backward(*tensors, *[outs[n] for n in out_names])
            res = tuple(outs[n] for n in out_names)
            return res[0] if len(res) == 1 else res

        @staticmethod
        def backward(ctx, *grads):
            saved = ctx.saved_tensors
            nt = len(ctx.tensor_pos)
            flat = list(ctx.others)
            for i, t in zip(ctx.tensor_pos, saved[:nt]):
                flat[i] = t
            outs = saved[nt:]
            args, in_grads = {}, [None] * len(flat)
            for i, (n, v) in enumerate(zip(in_names, flat)):
                if isinstance(v, torch.Tensor) and ctx.needs_input_grad[i] and v.dtype.is_floating_point:
                    g = torch.zeros_like(v)
                    in_grads[i] = g
                    args[n] = (v, g)
                else:
                    args[n] = v
            for n, o, g in zip(out_names, outs, grads):
                g = torch.zeros_like(o) if g is None else g.contiguous().clone()
                args[n] = (o, g)
            kernel.bwd(**args).launchRaw(blockSize=ctx.bs, gridSize=ctx.gs)
            return tuple(in_grads)

    def apply(**kwargs):
        unknown = [k for k in kwargs if k not in in_names]
        missing = [k for k in in_names if k not in kwargs]
        if unknown or missing:
            raise TypeError(f"'{kernel._kinfo.name}' (autograd) takes the inputs ({', '.join(in_names)})"
                            + (f"; unknown: {', '.join(unknown)}" if unknown else "")
                            + (f"; missing: {', '.join(missing)}" if missing else ""))
        return _Fn.apply(*[kwargs[n] for n in in_names])

    apply.__name__ = kernel._kinfo.name
    return apply
