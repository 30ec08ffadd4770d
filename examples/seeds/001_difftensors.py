"""Seed 001 ("Differentiable Tensors"): every Python snippet of the seed, in order, with only the import
changed (`import slangpy as spy` -> `import slangjit as spy`).  `module` loads 001_difftensors.slang (the
seed's `example.slang`); the linear-layer snippet's undefined names (weight_init, bias_init, batch_data,
out_features, compute_loss_gradients_somehow, data) are defined just before it."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
os.chdir(HERE)

# --- snippet 1: polynomial ------------------------------------------------------------------------------
import slangjit as spy
import numpy as np

device = spy.create_device()
module = spy.Module.load_from_file(device, "001_difftensors.slang")

# Create input tensor with gradients (automatically zeroed)
x = spy.Tensor.from_numpy(device, np.array([1, 2, 3, 4], dtype=np.float32))
x = x.with_grads(zero=True)

# Create output tensor
result = spy.Tensor.empty(device, x.shape, spy.float32)

# Forward pass: evaluate polynomial
# Result: 2*x^2 + 8*x - 1
module.polynomial(idx=spy.grid(x.shape), a=2, b=8, c=-1, x=x, result=result)
print(result.to_numpy())  # [9., 27., 53., 87.]   (seed slip: the formula gives [9, 23, 41, 63])

# Attach gradients to result and set to 1
result = result.with_grads()
result.grad.copy_from_numpy(np.ones(4, dtype=np.float32))

# Backward pass: compute gradients
# Gradient: 4*x + 8
module.polynomial.bwds(idx=spy.grid(x.shape), a=2, b=8, c=-1, x=x, result=result)
print(x.grad.to_numpy())  # [12., 16., 20., 24.]

# --- snippet 2: in-place with separate grad_in / grad_out -------------------------------------------------
import slangjit as spy
import numpy as np

device = spy.create_device()
module = spy.Module.load_from_file(device, "001_difftensors.slang")

# Create input tensor with gradients (ones for input, zeroed for output)
x = spy.Tensor.from_numpy(device, np.array([1, 2, 3, 4], dtype=np.float32))
x = x.with_grads(grad_in=spy.Tensor.ones(device, shape=(4,), dtype=float),
                 grad_out=spy.Tensor.zeros(device, shape=(4,), dtype=float))

# Forward pass will populate the primals and ignore grads
module.process_inplace(idx=spy.grid(x.shape), data=x)

# Backwards pass will read primals, read grad_in and write grad_out
module.process_inplace.bwds(idx=spy.grid(x.shape), data=x)
print(x.grad_out.to_numpy())   # d(2v)/dv * 1 = [2, 2, 2, 2]

# --- snippet 3: concrete DiffTensor ------------------------------------------------------------------------
data = np.array([0.25, 0.5, 0.75, 1.5], dtype=np.float32)

# This will FAIL on D3D12/Vulkan if function uses DiffTensor
input = spy.Tensor.from_numpy(device, data)  # No gradients!
print(module.function_with_concrete_type(input))   # the CPU device binds no gradient buffer: 0.75

# This will work
input = spy.Tensor.from_numpy(device, data).with_grads()
print(module.function_with_concrete_type(input))

# (the custom-derivative function of the same section, forward and backward)
act = module.custom_activation(spy.grid(input.shape), input, _result='numpy')
print(act)
act_grad = spy.Tensor.from_numpy(device, np.ones(4, dtype=np.float32))
module.custom_activation.bwds(spy.grid(input.shape), input, _result=spy.Tensor.from_numpy(
    device, act.astype(np.float32)).with_grads(grad_in=act_grad, grad_out=act_grad))
print(input.grad.to_numpy())   # 6x(1-x) inside (0, 1), else 0

# --- snippet 4: linear layer -------------------------------------------------------------------------------
out_features, in_features = 3, 4
rng = np.random.default_rng(1)
weight_init = rng.standard_normal((out_features, in_features)).astype(np.float32)
bias_init = rng.standard_normal(out_features).astype(np.float32)
batch_data = rng.standard_normal(in_features).astype(np.float32)


def compute_loss_gradients_somehow(y):
    return 2.0 * y.to_numpy()           # d/dy of sum(y^2)


# Create trainable parameters with gradients
weights = spy.Tensor.from_numpy(device, weight_init).with_grads(zero=True)
bias = spy.Tensor.from_numpy(device, bias_init).with_grads(zero=True)

# Create input batch with gradients
x = spy.Tensor.from_numpy(device, batch_data).with_grads(zero=True)

# Allocate output
y = spy.Tensor.empty(device, shape=(out_features,), dtype=float).with_grads()

# Forward pass
module.linear_layer(
    spy.grid(shape=(out_features,)),
    weights, bias, x, y
)

# Compute loss and set output gradients
loss_gradients = compute_loss_gradients_somehow(y)
y.grad.copy_from_numpy(loss_gradients)

# Backward pass - accumulates gradients in weights, bias, and x
module.linear_layer.bwds(
    spy.grid(shape=(out_features,)),
    weights, bias, x, y
)
print(y.to_numpy())
print(weights.grad.to_numpy())
print(bias.grad.to_numpy())
print(x.grad.to_numpy())
