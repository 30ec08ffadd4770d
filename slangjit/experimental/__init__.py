"""SlangPy's `slangpy.experimental` import paths (the classes live in slangjit.functional)."""
