"""The behaviour of slang-torch's own test classes (tests/test.py there), ported: each runs on CPU torch
tensors here and on CUDA tensors on a GPU machine (the `device` fixture parametrized with "cuda")."""
from __future__ import annotations

import os
import shutil
import warnings

import pytest

torch = pytest.importorskip("torch")

import slangjit.torch as st                                     # noqa: E402
from slangjit.compiler.source import CompileError              # noqa: E402

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)


def _load(slang_dir, name, **kw):
    return st.loadModule(str(slang_dir / name), **kw)


def _copy_template(src, dst, **subs):
    text = src.read_text()
    for k, v in subs.items():
        text = text.replace(f"%{k}%", v)
    dst.write_text(text)


class TestSmoke:
    def test_kernel_with_atomics(self, slang_dir, tdev):
        m = _load(slang_dir, "smoke.slang")
        x = torch.tensor([[1., 2.], [3., 4.]], device=tdev)
        y = torch.full((2, 2), 7., device=tdev)
        m.myKernel(inValues=x, outValues=y, v=1.0).launchRaw(blockSize=(2, 2, 1), gridSize=(1, 1, 1))
        # thread (tx, ty) reads x[tx, ty], zeroes y[tx, ty] and adds 1 + x[tx, ty]
        assert torch.equal(y.cpu(), x.cpu() + 1)

    def test_torch_entry_point_is_a_clear_error(self, slang_dir, tdev):
        m = _load(slang_dir, "smoke.slang")
        with pytest.raises(NotImplementedError, match=r"\[TorchEntryPoint\].*AutoPyBindCUDA"):
            m.runCompute(1.0)


class TestOptions:
    def test_defines_give_distinct_modules(self, slang_dir, tdev):
        m1 = _load(slang_dir, "multiply.slang", defines={"FACTOR": "2.0"})
        m2 = _load(slang_dir, "multiply.slang", defines={"FACTOR": "1.0"})
        assert m1 is not m2
        x = torch.tensor([[1., 2.], [3., 4.]], device=tdev)
        y1, y2 = torch.zeros_like(x), torch.zeros_like(x)
        m1.multiply(input=x, output=y1).launchRaw(blockSize=(32, 32, 1), gridSize=(1, 1, 1))
        m2.multiply(input=x, output=y2).launchRaw(blockSize=(32, 32, 1), gridSize=(1, 1, 1))
        assert torch.equal(y1.cpu(), torch.tensor([[2., 4.], [6., 8.]]))
        assert torch.equal(y2.cpu(), torch.tensor([[1., 2.], [3., 4.]]))

    def test_missing_define_is_a_located_error(self, slang_dir, tdev):
        with pytest.raises(CompileError, match=r"multiply\.slang:\d+:\d+: error .*FACTOR"):
            _load(slang_dir, "multiply.slang", defines={})
        assert issubclass(CompileError, Exception)

    def test_slang_torch_keywords_accepted(self, slang_dir, tdev):
        m = _load(slang_dir, "square.slang", skipNinjaCheck=True, cudaFastMath=False, slangGenLineInfo=False,
                  cudaGenLineInfo=False, verbose=False, includePaths=[], extraSlangFlags=["-DUNUSED=1"])
        assert hasattr(m, "square")
        with pytest.warns(DeprecationWarning, match="skipSlang"):
            _load(slang_dir, "square.slang", skipSlang=True)
        with pytest.raises(TypeError):
            _load(slang_dir, "square.slang", noSuchOption=1)
        with pytest.raises(FileNotFoundError, match="nothere.slang"):
            st.loadModule(str(slang_dir / "nothere.slang"))


class TestHotReload:
    def test_edit_between_loads_recompiles(self, slang_dir, tmp_path, tdev):
        f = tmp_path / "multiply.slang"
        tmpl = (slang_dir / "multiply.slang").read_text().replace("FACTOR", "%FACTOR%")
        f.write_text(tmpl.replace("%FACTOR%", "2.0"))
        x = torch.tensor([[1., 2.], [3., 4.]], device=tdev)
        m1 = st.loadModule(str(f))
        y = torch.zeros_like(x)
        m1.multiply(input=x, output=y).launchRaw(blockSize=(32, 32, 1), gridSize=(1, 1, 1))
        assert torch.equal(y.cpu(), 2 * x.cpu())
        f.write_text(tmpl.replace("%FACTOR%", "1.0"))
        m2 = st.loadModule(str(f))
        y = torch.zeros_like(x)
        m2.multiply(input=x, output=y).launchRaw(blockSize=(32, 32, 1), gridSize=(1, 1, 1))
        assert torch.equal(y.cpu(), x.cpu())
        # the first module still runs its own code
        m1.multiply(input=x, output=y).launchRaw(blockSize=(32, 32, 1), gridSize=(1, 1, 1))
        assert torch.equal(y.cpu(), 2 * x.cpu())

    def test_unchanged_reload_is_the_same_module(self, slang_dir, tdev):
        m1 = _load(slang_dir, "square.slang")
        m2 = _load(slang_dir, "square.slang")
        assert m1 is m2


class TestMultiFileModule:
    def test_edit_of_imported_module_recompiles(self, slang_dir, tmp_path, tdev):
        shutil.copy(slang_dir / "import_module.slang", tmp_path)
        imp = tmp_path / "imported_module.slang"
        _copy_template(slang_dir / "imported_module_template.slang", imp, FACTOR="2.0")
        x = torch.tensor([[1., 2.], [3., 4.]], device=tdev)
        m1 = st.loadModule(str(tmp_path / "import_module.slang"))
        y = torch.zeros_like(x)
        m1.multiply(input=x, output=y).launchRaw(blockSize=(32, 32, 1), gridSize=(1, 1, 1))
        assert torch.equal(y.cpu(), 2 * x.cpu())
        _copy_template(slang_dir / "imported_module_template.slang", imp, FACTOR="1.0")
        m2 = st.loadModule(str(tmp_path / "import_module.slang"))
        y = torch.zeros_like(x)
        m2.multiply(input=x, output=y).launchRaw(blockSize=(32, 32, 1), gridSize=(1, 1, 1))
        assert torch.equal(y.cpu(), x.cpu())


class TestCacheState:
    def test_failed_build_leaves_a_usable_cache(self, slang_dir, tmp_path, tdev):
        f = tmp_path / "multiply.slang"
        shutil.copy(slang_dir / "multiply.slang", f)
        with pytest.raises(CompileError):
            st.loadModule(str(f))
        m = st.loadModule(str(f), defines={"FACTOR": "2.0"})
        x = torch.tensor([[1., 2.], [3., 4.]], device=tdev)
        y = torch.zeros_like(x)
        m.multiply(input=x, output=y).launchRaw(blockSize=(32, 32, 1), gridSize=(1, 1, 1))
        assert torch.equal(y.cpu(), 2 * x.cpu())

    def test_nothing_is_written_beside_the_sources(self, slang_dir, tmp_path, tdev):
        shutil.copy(slang_dir / "square.slang", tmp_path)
        m = st.loadModule(str(tmp_path / "square.slang"))
        x = torch.arange(5., device=tdev)
        y = torch.zeros_like(x)
        m.square(input=x, output=y).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
        assert sorted(os.listdir(tmp_path)) == ["square.slang"]


class TestIncludePaths:
    def test_include_paths_resolve_imports(self, slang_dir, tmp_path, tdev):
        d1, d2, d3 = (tmp_path / n for n in ("subdir1", "subdir2", "subdir3"))
        for d in (d1, d2, d3):
            d.mkdir()
        shutil.copy(slang_dir / "import_module.slang", d1)
        _copy_template(slang_dir / "imported_module_template.slang", d2 / "imported_module.slang", FACTOR="2.0")
        _copy_template(slang_dir / "imported_module_template.slang", d3 / "imported_module.slang", FACTOR="1.0")
        main = str(d1 / "import_module.slang")
        with pytest.raises(CompileError, match="imported_module"):
            st.loadModule(main)
        x = torch.tensor([[1., 2.], [3., 4.]], device=tdev)
        for inc, factor in ((d2, 2.0), (d3, 1.0)):
            m = st.loadModule(main, includePaths=[str(inc)])
            y = torch.zeros_like(x)
            m.multiply(input=x, output=y).launchRaw(blockSize=(32, 32, 1), gridSize=(1, 1, 1))
            assert torch.equal(y.cpu(), factor * x.cpu())


class TestAutoPyBind:
    def test_kwargs_and_launch_raw(self, slang_dir, tdev):
        m = _load(slang_dir, "square.slang")
        x = torch.tensor([1., 2., 3., 4.], device=tdev)
        y = torch.zeros_like(x)
        m.square(input=x, output=y).launchRaw(blockSize=(32, 32, 1), gridSize=(1, 1, 1))
        assert torch.equal(y.cpu(), torch.tensor([1., 4., 9., 16.]))

    def test_many_blocks(self, slang_dir, tdev):
        m = _load(slang_dir, "square.slang")
        x = torch.randn(1000, device=tdev)
        y = torch.zeros_like(x)
        m.square(input=x, output=y).launchRaw(blockSize=(64, 1, 1), gridSize=(16, 1, 1))
        assert torch.equal(y, x * x)

    def test_call_errors_name_the_arguments(self, slang_dir, tdev):
        m = _load(slang_dir, "square.slang")
        x = torch.ones(4, device=tdev)
        with pytest.raises(ValueError, match=r"positional.*input, output"):
            m.square(x, x)
        with pytest.raises(TypeError, match=r"\(input, output\); unknown: outptu; missing: output"):
            m.square(input=x, outptu=x)
        with pytest.raises(TypeError, match="blockSize must be a tuple of 3 ints"):
            m.square(input=x, output=x).launchRaw(blockSize=(32, 1), gridSize=(1, 1, 1))
        with pytest.raises(TypeError, match="gridSize must be a tuple of 3 ints"):
            m.square(input=x, output=x).launchRaw(blockSize=(32, 1, 1), gridSize=(1.0, 1, 1))
        with pytest.raises(TypeError, match="blockSize must be a tuple of 3 ints"):
            m.square(input=x, output=x).launchRaw(blockSize=(True, 1, 1), gridSize=(1, 1, 1))
        with pytest.raises(ValueError, match=r"gridSize must not be negative, got \(1, -1, 1\)"):
            m.square(input=x, output=x).launchRaw(blockSize=(32, 1, 1), gridSize=(1, -1, 1))
        y = torch.zeros_like(x)
        m.square(input=x + 1, output=y).launchRaw(blockSize=[32, 1, 1], gridSize=[1, 1, 1])   # lists too
        assert torch.equal(y, torch.full_like(x, 4.0))
        with pytest.raises(TypeError, match=r"argument 'input': expected a torch\.float32 tensor.*torch\.int64"):
            m.square(input=torch.ones(4, dtype=torch.int64, device=tdev), output=x).launchRaw(
                blockSize=(32, 1, 1), gridSize=(1, 1, 1))
        with pytest.raises(TypeError, match=r"argument 'output': expected a torch\.Tensor"):
            m.square(input=x, output=[1.0]).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
        with pytest.raises(NotImplementedError):
            m.square(input=x, output=x).autoLaunch((4, 1, 1))
        with pytest.raises(ValueError, match="does not have a fwd-mode derivative"):
            m.square.fwd(input=x, output=x)

    def test_device_errors_name_the_argument(self, slang_dir, tdev):
        m = _load(slang_dir, "square.slang")
        x = torch.ones(4, device=tdev)
        meta = torch.ones(4, device="meta")
        with pytest.raises(ValueError, match=r"a tensor on meta.*CPU and CUDA"):
            m.square(input=meta, output=x).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
        with pytest.raises(ValueError, match=rf"argument 'output': tensor is on meta.*runs on {tdev}"):
            m.square(input=x, output=meta).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
        if tdev == "cuda":
            with pytest.raises(ValueError, match=r"argument 'output': tensor is on cpu.*runs on cuda:0"):
                m.square(input=x, output=torch.ones(4)).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
            y = torch.zeros_like(x)                   # a non-default current stream is used and ordered
            x3 = x * 3
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                m.square(input=x3, output=y).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
            s.synchronize()
            assert torch.equal(y.cpu(), torch.full((4,), 9.0))
        else:
            y = torch.zeros(4)
            m.square(input=torch.full((4,), 3.0), output=y).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
            assert torch.equal(y, torch.full((4,), 9.0))

    def test_unlaunched_call_warns(self, slang_dir, tdev):
        m = _load(slang_dir, "square.slang")
        x = torch.ones(4, device=tdev)
        with pytest.warns(RuntimeWarning, match="never launched"):
            m.square(input=x, output=x)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            m.square(input=x, output=x).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))


class TestAutoPyBindDiff:
    X = [1., 2., 3., 4.]

    def test_primal_call(self, slang_dir, tdev):
        m = _load(slang_dir, "square_diff.slang")
        x = torch.tensor(self.X, device=tdev)
        for wrap in (lambda t: t, lambda t: (t,), lambda t: st.DiffTensorView(value=t)):
            y = torch.zeros_like(x)
            m.square(input=wrap(x), output=wrap(y)).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
            assert torch.equal(y.cpu(), torch.tensor([1., 4., 9., 16.]))

    def test_fwd(self, slang_dir, tdev):
        m = _load(slang_dir, "square_diff.slang")
        x = torch.tensor(self.X, device=tdev)
        xd = torch.tensor([1., 0., 0., 1.], device=tdev)
        for pair in (lambda p, g: (p, g), lambda p, g: m.DiffTensorView(value=p, grad=g)):
            y, yd = torch.zeros_like(x), torch.zeros_like(x)
            m.square.fwd(input=pair(x, xd), output=pair(y, yd)).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
            assert torch.equal(y.cpu(), torch.tensor([1., 4., 9., 16.]))
            assert torch.equal(yd.cpu(), torch.tensor([2., 0., 0., 8.]))

    def test_bwd(self, slang_dir, tdev):
        m = _load(slang_dir, "square_diff.slang")
        x = torch.tensor(self.X, device=tdev)
        for pair in (lambda p, g: (p, g), lambda p, g: m.DiffTensorView(value=p, grad=g)):
            y = torch.zeros_like(x)
            xd = torch.zeros_like(x)
            yd = torch.tensor([1., 0., 1., 0.], device=tdev)
            m.square.bwd(input=pair(x, xd), output=pair(y, yd)).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
            assert torch.equal(xd.cpu(), torch.tensor([2., 0., 6., 0.]))
            assert torch.equal(yd.cpu(), torch.zeros(4))           # store's backward consumed the gradient

    def test_gradient_shape_must_match(self, slang_dir, tdev):
        m = _load(slang_dir, "square_diff.slang")
        x = torch.ones(4, device=tdev)
        with pytest.raises(ValueError, match=r"argument 'input': gradient of shape \(3,\)"):
            m.square.bwd(input=(x, torch.zeros(3, device=tdev)), output=(x, x)).launchRaw(
                blockSize=(32, 1, 1), gridSize=(1, 1, 1))


class TestAutoPyBindStruct:
    def test_struct_as_tuple_dict_namedtuple(self, slang_dir, tdev):
        m = _load(slang_dir, "multiply_struct.slang")
        a = torch.tensor([[1., 2.], [3., 4.]], device=tdev)
        b = torch.tensor([[10., 20.], [30., 40.]], device=tdev)
        expected = torch.tensor([[10., 40.], [90., 160.]])
        for foo in ((a, b), {"A": a, "B": b}, m.Foo(A=a, B=b)):
            y = torch.zeros_like(a)
            m.multiply(foo=foo, result=y).launchRaw(blockSize=(32, 32, 1), gridSize=(1, 1, 1))
            assert torch.equal(y.cpu(), expected)

    def test_struct_errors(self, slang_dir, tdev):
        m = _load(slang_dir, "multiply_struct.slang")
        a = torch.ones(2, 2, device=tdev)
        for bad in ((a,), (a, a, a), {"A": a}, {"A": a, "Ba": a}):
            with pytest.raises(TypeError, match="argument 'foo'"):
                m.multiply(foo=bad, result=a).launchRaw(blockSize=(32, 32, 1), gridSize=(1, 1, 1))


class TestBuiltinTypeInputs:
    M = ((1., 2., 3.), (4., 5., 6.), (7., 8., 9.))

    def test_vector(self, slang_dir, tdev):
        m = _load(slang_dir, "builtin_inputs.slang")
        y = torch.zeros(3, device=tdev)
        m.copy_vector(v=(1., 2., 3.), output=y).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
        assert torch.equal(y.cpu(), torch.tensor([1., 2., 3.]))

    def test_matrix(self, slang_dir, tdev):
        m = _load(slang_dir, "builtin_inputs.slang")
        y = torch.zeros(9, device=tdev)
        m.copy_matrix(m=self.M, output=y).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
        assert torch.equal(y.cpu(), torch.arange(1., 10.))

    def test_struct_with_matrix(self, slang_dir, tdev):
        m = _load(slang_dir, "builtin_inputs.slang")
        y = torch.zeros(9, device=tdev)
        m.copy_struct(h=m.Holder(m=self.M, scale=2.0), output=y).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
        assert torch.equal(y.cpu(), 2 * torch.arange(1., 10.))

    def test_array(self, slang_dir, tdev):
        m = _load(slang_dir, "builtin_inputs.slang")
        y = torch.zeros(9, device=tdev)
        m.copy_array(a=list(self.M), output=y).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
        assert torch.equal(y.cpu(), torch.arange(1., 10.))

    def test_wrong_vector_length(self, slang_dir, tdev):
        m = _load(slang_dir, "builtin_inputs.slang")
        y = torch.zeros(3, device=tdev)
        with pytest.raises((TypeError, ValueError), match="'v'"):
            m.copy_vector(v=(1., 2.), output=y).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))


class TestAutogradFunction:
    def test_hand_written_function(self, slang_dir, tdev):
        m = _load(slang_dir, "square_diff.slang")

        class Square(torch.autograd.Function):          # slang-torch's documented pattern
            @staticmethod
            def forward(ctx, x):
                y = torch.zeros_like(x)
                m.square(input=x, output=y).launchRaw(blockSize=(32, 1, 1), gridSize=((x.shape[0] + 31) // 32, 1, 1))
                ctx.save_for_backward(x, y)
                return y

            @staticmethod
            def backward(ctx, grad_y):
                x, y = ctx.saved_tensors
                grad_x = torch.zeros_like(x)
                grad_y = grad_y.contiguous()
                m.square.bwd(input=(x, grad_x), output=(y, grad_y)).launchRaw(
                    blockSize=(32, 1, 1), gridSize=((x.shape[0] + 31) // 32, 1, 1))
                return grad_x

        x = torch.tensor([1., 2., 3., 4.], device=tdev, requires_grad=True)
        y = Square.apply(x)
        y.backward(torch.tensor([1., 2., 3., 4.], device=tdev))
        assert torch.equal(x.grad.cpu(), torch.tensor([2., 8., 18., 32.]))

    def test_one_liner(self, slang_dir, tdev):
        m = _load(slang_dir, "square_diff.slang")
        square = st.autograd_function(m.square, outputs={"output": lambda input: torch.empty_like(input)},
                                      blockSize=(32, 1, 1), gridSize=lambda input: ((input.numel() + 31) // 32, 1, 1))
        x = torch.linspace(-2, 2, 100, dtype=torch.float32, device=tdev, requires_grad=True)
        y = square(input=x)
        assert torch.equal(y.detach(), x.detach() ** 2)
        g = torch.rand(100, device=tdev)
        gc = g.clone()
        y.backward(g)
        assert torch.allclose(x.grad, 2 * x.detach() * gc)
        assert torch.equal(g, gc)                       # torch's gradient buffer was not consumed
        # a broadcast incoming gradient (sum().backward()) works too
        x.grad = None
        square(input=x).sum().backward()
        assert torch.allclose(x.grad, 2 * x.detach())
        with pytest.raises(TypeError, match="missing: input"):
            square(x=x)


class TestBroadcastedTensorError:
    def test_stride_zero_output_rejected_input_accepted(self, slang_dir, tdev):
        m = _load(slang_dir, "square_diff.slang")
        x = torch.tensor([3.], device=tdev).expand(4)          # stride 0
        y = torch.zeros(4, device=tdev)
        m.square(input=x, output=y).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
        assert torch.equal(y.cpu(), torch.full((4,), 9.))      # read-only broadcast input: fine
        yb = torch.zeros(1, device=tdev).expand(4)
        with pytest.raises(ValueError, match=r"argument 'output': a broadcast tensor.*contiguous"):
            m.square(input=x, output=yb).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
        gy = torch.ones(1, device=tdev).expand(4)               # what sum().backward() hands over
        with pytest.raises(ValueError, match=r"argument 'output \(grad\)': a broadcast tensor"):
            m.square.bwd(input=(x.contiguous(), torch.zeros(4, device=tdev)), output=(y, gy)).launchRaw(
                blockSize=(32, 1, 1), gridSize=(1, 1, 1))
        gx = torch.zeros(4, device=tdev)
        m.square.bwd(input=(x.contiguous(), gx), output=(y, gy.contiguous())).launchRaw(
            blockSize=(32, 1, 1), gridSize=(1, 1, 1))
        assert torch.equal(gx.cpu(), torch.full((4,), 6.))


class TestEmptyTensor:
    def test_empty_tensor(self, slang_dir, tdev):
        m = _load(slang_dir, "copy.slang")
        x = torch.tensor([], device=tdev)
        y = torch.zeros_like(x)
        m.copy(input=x, output=y).launchRaw(blockSize=(32, 32, 1), gridSize=(1, 1, 1))
        assert y.numel() == 0
        m.copy(input=x, output=y).launchRaw(blockSize=(32, 1, 1), gridSize=(0, 1, 1))


class TestHalfDType:
    def test_half(self, slang_dir, tdev):
        m = _load(slang_dir, "square_half.slang")
        x = torch.tensor([1., 2., 3., 4.], dtype=torch.half, device=tdev)
        y = torch.zeros_like(x)
        m.square(input=x, output=y).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
        assert torch.equal(y.cpu(), torch.tensor([1., 4., 9., 16.], dtype=torch.half))
        gx, gy = torch.zeros_like(x), torch.ones_like(x)
        m.square.bwd(input=(x, gx), output=(y, gy)).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
        assert torch.equal(gx.cpu(), torch.tensor([2., 4., 6., 8.], dtype=torch.half))
        m.scale(input=x, output=y, s=0.5).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))
        assert torch.equal(y.cpu(), torch.tensor([.5, 1., 1.5, 2.], dtype=torch.half))
        with pytest.raises(TypeError, match=r"torch\.float16"):
            m.scale(input=x.float(), output=y, s=0.5).launchRaw(blockSize=(32, 1, 1), gridSize=(1, 1, 1))


class TestReusedParameterBlock:
    """Launches reuse one parameter block per thread and kernel: a launch without a gradient after one with a
    gradient must not see the earlier gradient's address (it is a view of nothing, every write dropped)."""

    def test_no_stale_gradient_view(self, slang_dir, tdev):
        m = _load(slang_dir, "square_diff.slang")
        x = torch.tensor([1., 2., 3.], device=tdev)
        y = torch.zeros(3, device=tdev)
        gx, gy = torch.zeros(3, device=tdev), torch.ones(3, device=tdev)
        m.square.bwd(input=(x, gx), output=(y, gy)).launchRaw(blockSize=(3, 1, 1), gridSize=(1, 1, 1))
        assert torch.equal(gx.cpu(), torch.tensor([2., 4., 6.]))
        gy2 = torch.ones(3, device=tdev)
        m.square.bwd(input=(x,), output=(y, gy2)).launchRaw(blockSize=(3, 1, 1), gridSize=(1, 1, 1))
        assert torch.equal(gx.cpu(), torch.tensor([2., 4., 6.]))       # the first launch's gradient untouched
        m.square.bwd(input=(x, gx), output=(y, torch.full((3,), 0.5, device=tdev))).launchRaw(
            blockSize=(3, 1, 1), gridSize=(1, 1, 1))
        assert torch.equal(gx.cpu(), torch.tensor([3., 6., 9.]))       # accumulated: 2x * 0.5 added
