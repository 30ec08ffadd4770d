"""examples/torch/ddp_train.py under torchrun with 2 processes (gloo, CPU): DDP's averaged gradients after one
step equal a single-process run on the concatenated batch, and the parameters stay equal over the steps.
(The NCCL run on 2 GPUs: `torchrun --nproc_per_node=2 examples/torch/ddp_train.py --cuda --check`.)"""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_gloo_two_processes_match_single_process(tmp_path):
    out = tmp_path / "ddp.json"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
           f"--master_port={_free_port()}", str(ROOT / "examples" / "torch" / "ddp_train.py"),
           "--steps", "5", "--batch", "64", "--check", "--out", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    # A gloo process sometimes aborts while the interpreter tears down ("terminate called without an active
    # exception", torch's gloo threads; seen with and without slangjit's changes) after rank 0 has written its
    # results: that exit is tolerated, every other failure is not, and the values below are checked either way.
    teardown_abort = "terminate called without an active exception" in p.stderr and out.exists()
    assert p.returncode == 0 or teardown_abort, p.stdout[-3000:] + p.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["world"] == 2 and r["backend"] == "gloo"
    assert set(r["first_step_grad_rel_diff"]) == {"hidden.w", "hidden.b", "head.weight", "head.bias"}
    for name, d in r["first_step_grad_rel_diff"].items():
        assert d < 1e-5, (name, d)                      # float32 summation-order differences only
    assert r["final_param_max_abs_diff"] < 1e-5
