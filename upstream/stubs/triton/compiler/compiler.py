"""`triton.compiler.compiler` stand-in (no `AttrsDescriptor`, see backends/compiler.py)."""
