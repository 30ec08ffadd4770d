"""SlangPy's `slangpy.core` import paths: `slangjit.core.calldata.set_print_generated_shaders` and
`slangjit.core.utils.parse_generic_signature` (the machinery lives in slangjit.functional)."""
