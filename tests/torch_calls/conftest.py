"""The torch tests need torch (the `test` extra installs the CPU wheel); without it they are skipped.
A test on the "cuda" device also needs a CUDA build of torch (a GPU machine with the CPU wheel skips it)."""
import pytest

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _torch_cuda_build(request):
    if "device" in request.fixturenames:
        dev = request.getfixturevalue("device")
        if not getattr(dev, "_host_memory", True) and not torch.cuda.is_available():
            pytest.skip("the CUDA device needs a CUDA build of torch (torch.cuda.is_available() is False)")
