"""SlangPy's functional API for slangjit: call Slang functions over tensors from Python.

    module = spy.Module.load_from_file(device, "example.slang")
    result = module.polynomial(a=2, b=8, c=-1, x=tensor, _result='tensor')
    module.polynomial.bwds(a=2, b=8, c=-1, x=x, _result=result)

Each call generates (once per argument signature) a compute kernel in Slang that loads the arguments at
the thread's call index, calls the function (or `bwd_diff` of it) and stores the results; see binding.py.
"""
from .errors import BoundVariableException, KernelGenException, ResolveException
from .function import Function, FunctionNode
from .generators import (CallIdArg, GridArg, RandFloatArg, ThreadIdArg, WangHashArg, call_id, grid, rand_float,
                         thread_id, wang_hash)
from .instances import InstanceList, InstanceTensor
from .module import SHADER_PATH, Module, Struct
from .values import (DiffPair, ValueRef, diffPair, floatDiffPair, floatRef, intRef)
