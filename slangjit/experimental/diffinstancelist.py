"""`slangpy.experimental.diffinstancelist`: the differentiable instance containers (functional/instances.py)."""
from ..functional.instances import InstanceDifferentiableBuffer, InstanceDifferentiableTensor

__all__ = ["InstanceDifferentiableBuffer", "InstanceDifferentiableTensor"]
