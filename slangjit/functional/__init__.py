"""SlangPy's functional API for slangjit: call Slang functions over tensors from Python.

    module = spy.Module.load_from_file(device, "example.slang")
    result = module.polynomial(a=2, b=8, c=-1, x=tensor, _result='tensor')
    module.polynomial.bwds(a=2, b=8, c=-1, x=x, _result=result)

Each call generates (once per argument signature) a compute kernel in Slang that loads the arguments at
the thread's call index, calls the function (or `bwd_diff` of it) and stores the results; see binding.py.
The package root (`slangjit/__init__.py`) exports the public names from the modules here; this package
imports nothing itself, so that its modules and slangjit.tensor import each other in one direction:
typeview, values, errors, generators, dlpack, layout -> slangjit.tensor -> calldata, leaves, binder, callgroups,
binding, rawdispatch, function, instances, packed, module.
"""
