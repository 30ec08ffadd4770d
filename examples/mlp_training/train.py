"""Train the seed 002 MLP (mlp.slang) with slangjit: the Python host of the tutorial's example.

    python examples/mlp_training/train.py                 # CPU device, default settings
    python examples/mlp_training/train.py --device cuda   # the CUDA device, when it can be created
    python examples/mlp_training/train.py --steps 6000 --batch 128 --lr 0.005 --seed 7

The network (4 -> 16 -> 4, leaky ReLU, half precision) learns four polynomials of (x, y) from
random samples in [-1, 1]^2.  Every step dispatches `learnGradient` over one batch (one
thread per sample: bwd_diff(loss) accumulates the gradients into a shared half buffer with
emulated half atomic adds) and then `adjustParameters` (one thread per parameter: gradient
descent, gradient reset).  The mean batch loss is printed every 100 steps; the curve is
written to loss.png when matplotlib is installed.  The exit status is 1 when the loss did not
fall by at least --min-drop (10x) from its start.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE.parents[1]) not in sys.path:          # run from a checkout without installing
    sys.path.insert(0, str(HERE.parents[1]))

import slangjit as spy  # noqa: E402

SHADER = HERE / "mlp.slang"
LAYER_SIZES = (4, 16, 4)
RW = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access
# Defaults: about 10 s of training on 2 CPU cores; the loss falls 40-65x (seeds 1-8).
STEPS, BATCH, LR, SEED = 4000, 64, 0.75 / 64, 2


def parameter_layout(sizes=LAYER_SIZES):
    """[(weights_offset, bias_offset, in, out)] per layer, in halves, and the total count.

    One buffer holds | weights0 | bias0 | weights1 | bias1 |, weights row-major Out x In; the
    gradient buffer has the same layout.
    """
    layers, off = [], 0
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        w = off
        b = w + n_in * n_out
        off = b + n_out
        layers.append((w, b, n_in, n_out))
    return layers, off


def init_parameters(seed: int, sizes=LAYER_SIZES) -> np.ndarray:
    """Uniform He-style initialisation (bound sqrt(6 / fan_in)), zero biases, as float16."""
    rng = np.random.default_rng(seed)
    layers, total = parameter_layout(sizes)
    p = np.zeros(total, np.float32)
    for w, b, n_in, n_out in layers:
        bound = np.sqrt(6.0 / n_in)
        p[w:b] = rng.uniform(-bound, bound, n_in * n_out)
    return p.astype(np.float16)


def groundtruth(x, y):
    return np.stack([(x + y) / (1 + y * y), 2 * x + y, 0.5 * x * x + 1.2 * y, x + 0.5 * y * y], axis=-1)


def create_device(kind: str):
    """The requested device; CUDA falls back to the CPU (with a message) when it can't be created."""
    if kind == "cuda":
        try:
            return spy.create_device(type=spy.DeviceType.cuda), "cuda"
        except Exception as e:  # noqa: BLE001 - any failure means "no usable CUDA device"
            print(f"train: the CUDA device could not be created ({type(e).__name__}: {e}); using the CPU device")
    return spy.create_device(type=spy.DeviceType.cpu), "cpu"


class MLPTrainer:
    """Buffers and kernels of one training run."""

    def __init__(self, device, params: np.ndarray, max_batch: int, max_steps: int = 1):
        self.device = device
        self.layers, self.count = parameter_layout()
        # one program per kernel, as SlangPy's create_compute_kernel takes a program's first entry point
        self.learn = device.create_compute_kernel(device.load_program(str(SHADER), ["learnGradient"]))
        self.adjust = device.create_compute_kernel(device.load_program(str(SHADER), ["adjustParameters"]))
        params = np.ascontiguousarray(params, dtype=np.float16)
        assert params.shape == (self.count,)
        self.params = device.create_buffer(element_count=self.count, struct_size=2, usage=RW, data=params)
        self.grads = device.create_buffer(element_count=self.count, struct_size=2, usage=RW,
                                          data=np.zeros(self.count, np.float16))
        # MyNetwork: per layer the addresses of weights, weightsGrad, biases, biasesGrad.
        p, g = self.params.device_address, self.grads.device_address
        table = []
        for w, b, _, _ in self.layers:
            table += [p + 2 * w, g + 2 * w, p + 2 * b, g + 2 * b]
        self.network = device.create_buffer(element_count=len(table), struct_size=8, usage=RW,
                                            data=np.array(table, np.uint64))
        # one loss slot per step, so nothing has to be cleared between steps
        self.max_steps = max_steps
        self.loss_max = device.create_buffer(element_count=max_steps, struct_size=4, usage=RW,
                                             data=np.zeros(max_steps, np.uint32))
        self.loss_sum = device.create_buffer(element_count=max_steps, struct_size=4, usage=RW,
                                             data=np.zeros(max_steps, np.float32))
        self.max_batch = max_batch
        self.inputs = None

    def set_inputs(self, xy: np.ndarray) -> None:
        """All the samples of the run, float2 each; batches are windows into this buffer."""
        xy = np.ascontiguousarray(xy, dtype=np.float32).reshape(-1, 2)
        self.inputs = self.device.create_buffer(element_count=xy.shape[0], struct_size=8, usage=RW, data=xy)

    def learn_gradient(self, first: int, count: int, slot: int = 0) -> None:
        """bwd_diff(loss) over samples [first, first + count): gradients add into self.grads."""
        self.learn.dispatch(thread_count=[count, 1, 1],
                            network=self.network.device_address,
                            lossBuffer=self.loss_max.device_address + 4 * slot,
                            lossSum=self.loss_sum.device_address + 4 * slot,
                            inputs=self.inputs.device_address + 8 * first,
                            count=count)

    def adjust_parameters(self, learning_rate: float) -> None:
        self.adjust.dispatch(thread_count=[self.count, 1, 1],
                             params=self.params.device_address,
                             gradients=self.grads.device_address,
                             learningRate=float(learning_rate),
                             count=self.count)

    def read_params(self) -> np.ndarray:
        return self.params.to_numpy().view(np.float16)[: self.count].copy()

    def read_grads(self) -> np.ndarray:
        return self.grads.to_numpy().view(np.float16)[: self.count].copy()

    def read_losses(self, n: int):
        """(mean loss, max loss) of the first n steps, float64."""
        sums = self.loss_sum.to_numpy().view(np.float32)[:n].astype(np.float64)
        maxs = self.loss_max.to_numpy().view(np.float32)[:n].astype(np.float64)  # float bits stored as uint
        return sums, maxs


def train(steps: int = STEPS, batch: int = BATCH, lr: float = LR, seed: int = SEED, device: str = "cpu",
          log_every: int = 100, plot: str | None = "loss.png", schedule: str = "cosine", quiet: bool = False) -> dict:
    """Run a training; returns {"loss": per-step mean loss, "max_loss": ..., "first", "last", "ratio", ...}.

    `lr` multiplies the gradient SUMMED over the batch (the kernels add every sample's gradient into
    one buffer), so the step on the mean gradient is lr * batch.  `schedule` "cosine" decays the
    learning rate to 0 over the run after a short warm-up (plain SGD otherwise stalls at its noise
    floor).
    """
    say = (lambda *a: None) if quiet else print
    dev, dev_kind = create_device(device)
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    trainer = MLPTrainer(dev, init_parameters(seed), batch, max_steps=steps)
    trainer.set_inputs(rng.uniform(-1.0, 1.0, (steps * batch, 2)))
    t_compile = time.perf_counter() - t0
    say(f"train: {dev_kind} device, network 4 -> 16 -> 4 (half, {trainer.count} parameters), "
        f"{steps} steps x batch {batch}, learning rate {lr} (kernels compiled/loaded in {t_compile:.1f} s)")
    t1 = time.perf_counter()
    for step in range(steps):
        trainer.learn_gradient(step * batch, batch, slot=step)
        trainer.adjust_parameters(learning_rate(lr, step, steps, schedule))
        if log_every and ((step + 1) % log_every == 0 or step == 0):
            sums, maxs = trainer.read_losses(step + 1)
            say(f"step {step + 1:5d}  loss {sums[step] / batch:.5f}  (max over batch {maxs[step]:.4f})")
    if hasattr(dev, "wait"):
        dev.wait()
    t_train = time.perf_counter() - t1
    sums, maxs = trainer.read_losses(steps)
    loss = sums / batch
    # first/last: averages over a window of steps, so one lucky batch does not decide the result
    win = max(1, min(20, steps // 10))
    first, last = float(loss[:win].mean()), float(loss[-win:].mean())
    ratio = first / last if last > 0 else float("inf")
    result = {"loss": loss, "max_loss": maxs, "first": first, "last": last, "ratio": ratio, "window": win,
              "time_train": t_train, "time_compile": t_compile, "device": dev_kind,
              "params": trainer.read_params(), "finite": bool(np.all(np.isfinite(loss)))}
    say(f"train: first loss {first:.5f}, last loss {last:.5f} (means over {win} steps), "
        f"fell {ratio:.1f}x in {t_train:.1f} s ({1e3 * t_train / steps:.2f} ms/step)")
    if plot:
        write_plot(loss, maxs, plot, say)
    return result


def learning_rate(lr: float, step: int, steps: int, schedule: str) -> float:
    """"cosine": a linear warm-up over the first 5 % of the steps (a full step from the random
    initialisation can diverge in half precision), then a cosine decay to 0."""
    if schedule == "cosine":
        warmup = max(1, steps // 20)
        return lr * min(1.0, (step + 1) / warmup) * 0.5 * (1.0 + np.cos(np.pi * step / steps))
    if schedule == "constant":
        return lr
    raise ValueError(f"unknown learning-rate schedule {schedule!r}")


def write_plot(loss, maxs, path, say=print) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        say("train: matplotlib is not installed; skipping loss.png")
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    steps = np.arange(1, len(loss) + 1)
    ax.semilogy(steps, maxs, color="0.75", lw=0.8, label="max over batch (WaveActiveMax)")
    ax.semilogy(steps, loss, lw=1.2, label="mean over batch")
    ax.set_xlabel("step")
    ax.set_ylabel("squared error")
    ax.set_title("seed 002 MLP (4-16-4, half) trained with slangjit")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    say(f"train: wrote {os.path.abspath(path)}")
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--batch", type=int, default=BATCH)
    ap.add_argument("--lr", type=float, default=LR, help="step size on the batch-summed gradient")
    ap.add_argument("--schedule", choices=["cosine", "constant"], default="cosine")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--log-every", type=int, default=100)
    ap.add_argument("--plot", default="loss.png", help="output image ('' to skip)")
    ap.add_argument("--min-drop", type=float, default=10.0, help="required first/last loss ratio")
    a = ap.parse_args(argv)
    r = train(a.steps, a.batch, a.lr, a.seed, a.device, a.log_every, a.plot or None, a.schedule)
    if not r["finite"] or not r["ratio"] >= a.min_drop:
        print(f"train: FAILED: the loss fell {r['ratio']:.2f}x, less than the required {a.min_drop}x")
        return 1
    print(f"train: OK (loss fell {r['ratio']:.1f}x >= {a.min_drop}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
