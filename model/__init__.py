"""kvmc's model of SGLang's scheduler KV memory (sglang @ d55f1c28).

Written once, interpreted concretely (Python ints) and symbolically (z3 terms); see model/ops.py.
This package imports no engine.
"""
