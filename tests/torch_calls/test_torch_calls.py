"""Plain module calls with torch tensors (SlangPy's test_pytorch.py / test_torchintegration.py behaviour):
results are torch tensors on the inputs' device, views are read in place, outputs written in place, bad
outputs / dtypes / devices are errors naming the argument.  CPU here; "cuda" runs on a GPU machine."""
import numpy as np
import pytest
import torch

import slangjit as spy
from torch_src import SRC, tdev

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)


@pytest.fixture(scope="module")
def m(device):
    return spy.Module.load_from_source(device, "torch_calls", SRC)


def test_polynomial_returns_torch(m, device):
    x = torch.tensor([1., 2., 3., 4.], device=tdev(device))
    r = m.polynomial(2.0, 8.0, -1.0, x)
    assert isinstance(r, torch.Tensor) and r.device == x.device and r.dtype == torch.float32
    np.testing.assert_allclose(r.cpu().numpy(), [9, 23, 41, 63])


def test_keyword_and_broadcast_tensor_args(m, device):
    d = tdev(device)
    a = torch.tensor([2.0], device=d)
    x = torch.arange(6, dtype=torch.float32, device=d).reshape(2, 3)
    r = m.polynomial(a=a, b=8.0, c=-1.0, x=x)
    assert r.shape == (2, 3)
    xn = x.cpu().numpy()
    np.testing.assert_allclose(r.cpu().numpy(), 2 * xn * xn + 8 * xn - 1)


def test_result_preallocated_and_out_param(m, device):
    d = tdev(device)
    x = torch.tensor([1., 2., 3.], device=d)
    out = torch.zeros(3, device=d)
    r = m.add_f(x, 1.0, _result=out)
    assert r is out
    np.testing.assert_allclose(out.cpu().numpy(), [2, 3, 4])
    y = torch.zeros(3, device=d)
    assert m.fill_two(x, y) is None
    np.testing.assert_allclose(y.cpu().numpy(), [2, 3, 4])


def test_views_read_in_place(m, device):
    d = tdev(device)
    base = torch.arange(24, dtype=torch.float32, device=d).reshape(4, 6)
    cases = {"slice": base[1:3, ::2], "transpose": base.t(), "expand": torch.arange(3., device=d)[None, :].expand(5, 3),
             "offset": base[2]}
    for name, v in cases.items():
        r = m.add_f(v, 0.5)
        np.testing.assert_allclose(r.cpu().numpy(), v.cpu().numpy() + 0.5, err_msg=name)


def test_outputs_into_views(m, device):
    d = tdev(device)
    base = torch.zeros(4, 6, device=d)
    view = base[:, 1::2]                       # strided output
    m.add_f(torch.ones(4, 3, device=d), 2.0, _result=view)
    expect = np.zeros((4, 6), np.float32)
    expect[:, 1::2] = 3
    np.testing.assert_array_equal(base.cpu().numpy(), expect)


def test_stride0_or_overlapping_output_rejected(m, device):
    d = tdev(device)
    x = torch.ones(4, device=d)
    with pytest.raises(ValueError, match="stride-0"):
        m.add_f(x, 1.0, _result=torch.zeros(1, device=d).expand(4))
    over = torch.zeros(8, device=d).as_strided((4, 3), (1, 1))
    with pytest.raises(ValueError, match="overlapping"):
        m.add_f(torch.ones(4, 3, device=d), 1.0, _result=over)
    with pytest.raises(ValueError, match="argument 1"):
        m.fill_two(x, torch.zeros(1, device=d).expand(4))


@pytest.mark.parametrize("fn,dt,a,b,expect", [
    ("add_f", torch.float32, [1.5, 2], [1, 1], [2.5, 3]),
    ("add_d", torch.float64, [1.5, 2], [1, 1], [2.5, 3]),
    ("add_h", torch.float16, [1.5, 2], [1, 1], [2.5, 3]),
    ("add_i", torch.int32, [1, -2], [5, 5], [6, 3]),
    ("add_i64", torch.int64, [2**40, -2], [1, 5], [2**40 + 1, 3]),
    ("add_i8", torch.int8, [100, -2], [27, 5], [127, 3]),
    ("add_i16", torch.int16, [30000, -2], [7, 5], [30007, 3]),
    ("add_u8", torch.uint8, [200, 2], [55, 5], [255, 7]),
    ("and_b", torch.bool, [True, True], [True, False], [True, False]),
])
def test_dtypes(m, device, fn, dt, a, b, expect):
    d = tdev(device)
    r = getattr(m, fn)(torch.tensor(a, dtype=dt, device=d), torch.tensor(b, dtype=dt, device=d))
    assert r.dtype == dt and r.device.type == torch.device(d).type
    np.testing.assert_array_equal(r.cpu().numpy(), np.array(expect, dtype=r.cpu().numpy().dtype))


def test_bfloat16_is_a_clear_error(m, device):
    x = torch.ones(3, dtype=torch.bfloat16, device=tdev(device))
    with pytest.raises(TypeError, match="argument 0: torch dtype torch.bfloat16 has no Slang element type.*float"):
        m.add_f(x, 1.0)


def test_mixed_devices_error_names_both(m, device):
    x = torch.ones(3, device=tdev(device))
    with pytest.raises(ValueError, match="argument 0 is on .*argument 'b' is on meta"):
        m.add_f(x, b=torch.ones(3, device="meta"))


def test_module_device_mismatch(m, device):
    other = "meta"
    with pytest.raises(ValueError, match="torch tensor on meta"):
        m.add_f(torch.ones(3, device=other), 1.0)


def test_vector_trailing_dim(m, device):
    v = torch.arange(6, dtype=torch.float32, device=tdev(device)).reshape(2, 3)
    r = m.scale3(v, 2.0)
    assert r.shape == (2, 3)
    np.testing.assert_allclose(r.cpu().numpy(), 2 * v.cpu().numpy())


def test_struct_arg_as_dict(m, device):
    d = tdev(device)
    p = {"x": torch.tensor([1., 2.], dtype=torch.float64, device=d),
         "y": torch.tensor([3., 4.], dtype=torch.float64, device=d)}
    r = m.pt_len2(p, 1.0)
    np.testing.assert_allclose(r.cpu().numpy(), [1 + 9 + 3, 4 + 16 + 8])


def test_struct_result_dict_of_tensors(m, device):
    r = m.make_rec(torch.tensor([1., 2.], device=tdev(device)))
    assert set(r) == {"a", "n", "v"}
    np.testing.assert_allclose(r["a"].cpu().numpy(), [1, 2])
    np.testing.assert_array_equal(r["n"].cpu().numpy(), [3, 3])
    np.testing.assert_allclose(r["v"].cpu().numpy(), [[1, 2, 3], [2, 4, 6]])


def test_scalar_tensors(m, device):
    d = tdev(device)
    r = m.add_f(torch.tensor(1.5, device=d), torch.tensor(2.0, device=d))
    assert r.shape == () and float(r) == 3.5


def test_numpy_result_mode(m, device):
    r = m.add_f(torch.tensor([1., 2.], device=tdev(device)), 1.0, _result="numpy")
    assert isinstance(r, np.ndarray)
    np.testing.assert_allclose(r, [2, 3])


def test_tensor_to_from_torch(m, device):
    d = tdev(device)
    t = torch.arange(6, dtype=torch.float32, device=d).reshape(2, 3)[:, 1:]
    s = spy.Tensor.from_torch(device, t)
    assert tuple(s.shape) == (2, 2)
    np.testing.assert_allclose(s.to_numpy(), t.cpu().numpy())
    back = s.to_torch()
    assert back.data_ptr() == t.data_ptr() and back.stride() == t.stride()     # no copy
    r = m.add_f(s, 1.0)
    np.testing.assert_allclose(r.to_torch().cpu().numpy(), t.cpu().numpy() + 1)


def test_bwds_with_torch_tensors_points_to_autograd(m, device):
    with pytest.raises(ValueError, match="torch.autograd"):
        m.polynomial.bwds(1.0, 2.0, 3.0, torch.ones(2, device=tdev(device)), _result=torch.ones(2, device=tdev(device)))
