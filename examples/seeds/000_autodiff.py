"""Seed 000 ("Basic Auto-diff"): every Python snippet of the seed, in order, with only the import changed
(`import slangpy as spy` -> `import slangjit as spy`).  The device/module preamble is the page's implied setup."""
import os

import numpy as np

import slangjit as spy
from slangjit import Tensor

HERE = os.path.dirname(os.path.abspath(__file__))
device = spy.create_device(include_paths=[HERE])
module = spy.Module.load_from_file(device, "000_autodiff.slang")

# --- seed snippets below ---------------------------------------------------------------------------------

# Create a tensor with attached grads from a numpy array
# Note: We pass zero=True to initialize the grads to zero on allocation
x = spy.Tensor.numpy(device, np.array([1, 2, 3, 4], dtype=np.float32)).with_grads(zero=True)

# Evaluate the polynomial and ask for a tensor back
# Expecting result = 2x^2 + 8x - 1
result: spy.Tensor = module.polynomial(a=2, b=8, c=-1, x=x, _result='tensor')
print(result.to_numpy())

result = spy.Tensor(device, element_type=module.float, shape=(4,))
module.polynomial(a=2, b=8, c=-1, x=x, _result=result)

result: spy.Tensor = module.polynomial.return_type(Tensor)(a=2, b=8, c=-1, x=x)

# Attach gradients to the result, and set them to 1 for the backward pass
result = result.with_grads()
result.grad.storage.copy_from_numpy(np.array([1, 1, 1, 1], dtype=np.float32))

# Call the backwards version of module.polynomial
# This will read the grads from _result, and write the grads to x
# Expecting result = 4x + 8
module.polynomial.bwds(a=2, b=8, c=-1, x=x, _result=result)
print(x.grad.to_numpy())
