"""`triton.backends` stand-in (torch._inductor imports `triton.backends.compiler` when it finds a triton package)."""
