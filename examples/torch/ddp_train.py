"""Train a model whose hidden layer is a Slang function with DistributedDataParallel.

    torchrun --nproc_per_node=2 examples/torch/ddp_train.py                 # CPU, gloo
    torchrun --nproc_per_node=2 examples/torch/ddp_train.py --cuda          # one GPU per process, NCCL

DDP does the all-reduce of the gradients (the Slang layer's parameters are ordinary nn.Parameters whose
gradients torch.autograd fills through the .bwds kernel).  With --check, rank 0 also runs the same model
without DDP on the concatenated batch of all ranks and compares the gradients after the first step (and the
parameters after the last), writing the result as JSON to --out.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import slangjit as spy

HERE = os.path.dirname(os.path.abspath(__file__))


class SlangHidden(torch.nn.Module):
    """H tanh units: out[n, h] = tanh(dot(w[h], x[n]) + b[h]), computed by `unit` in slang_layer.slang."""

    def __init__(self, module, hidden: int, gen: torch.Generator):
        super().__init__()
        self.unit = module.unit
        self.w = torch.nn.Parameter(torch.randn(1, hidden, 3, generator=gen) * 0.5)
        self.b = torch.nn.Parameter(torch.zeros(1, hidden))

    def forward(self, x):                       # x: (N, 3)
        return self.unit(self.w, self.b, x[:, None, :])


class Model(torch.nn.Module):
    def __init__(self, module, hidden: int = 16, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.hidden = SlangHidden(module, hidden, g)
        self.head = torch.nn.Linear(hidden, 1)
        with torch.no_grad():
            self.head.weight.copy_(torch.randn(1, hidden, generator=g) * 0.3)
            self.head.bias.zero_()

    def forward(self, x):
        return self.head(self.hidden(x))[:, 0]


def target(x):
    return torch.sin(2 * x[:, 0]) * x[:, 1] + 0.5 * x[:, 2]


def batch(step: int, rank: int, n: int, device):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.rand(n, 3, generator=g) * 2 - 1
    return x.to(device), target(x).to(device)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuda", action="store_true")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=256, help="per process")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    if a.cuda:
        torch.cuda.set_device(local)
        tdev = torch.device("cuda", local)
    else:
        tdev = torch.device("cpu")
    dist.init_process_group("nccl" if a.cuda else "gloo", rank=rank, world_size=world)
    device = spy.create_torch_device(tdev)
    module = spy.Module.load_from_file(device, os.path.join(HERE, "slang_layer.slang"))
    model = Model(module).to(tdev)
    ddp = DDP(model)
    ref = Model(module).to(tdev) if (a.check and rank == 0) else None
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1) if ref is not None else None
    result = {"world": world, "backend": "nccl" if a.cuda else "gloo"}
    t0 = time.perf_counter()
    for step in range(a.steps):
        x, y = batch(step, rank, a.batch, tdev)
        opt.zero_grad()
        loss = ((ddp(x) - y) ** 2).mean()
        loss.backward()                          # DDP all-reduces (averages) the gradients here
        if ref is not None:
            xs, ys = zip(*(batch(step, r, a.batch, tdev) for r in range(world)))
            ref_opt.zero_grad()
            ref_loss = ((ref(torch.cat(xs)) - torch.cat(ys)) ** 2).mean()
            ref_loss.backward()
            if step == 0:
                diffs = {n: float((p.grad - q.grad).abs().max() / (q.grad.abs().max() + 1e-12))
                         for (n, p), (_, q) in zip(model.named_parameters(), ref.named_parameters())}
                result["first_step_grad_rel_diff"] = diffs
            ref_opt.step()
        opt.step()
        if rank == 0 and (step % 50 == 0 or step == a.steps - 1):
            print(f"step {step:4d}  loss {loss.item():.5f}", flush=True)
    if a.cuda:
        torch.cuda.synchronize()
    result["seconds"] = time.perf_counter() - t0
    result["final_loss"] = loss.item()
    if ref is not None:
        result["final_param_max_abs_diff"] = max(float((p - q).abs().max())
                                                 for p, q in zip(model.parameters(), ref.parameters()))
    if rank == 0:
        print(json.dumps(result), flush=True)
        if a.out:
            with open(a.out, "w") as f:
                json.dump(result, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
