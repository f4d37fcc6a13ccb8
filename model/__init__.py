"""kvmc's model of SGLang's scheduler KV memory, release by release: the presets of model/designs.py
are SGLang 0.5.10.post1, 0.5.11, 0.5.12.post1, 0.5.13 and 0.5.18 .. 0.5.23, and `current` is
0.5.23 (`CURRENT_RELEASE`); what changed between them is a design flag (a fix) the transitions read.
A module names the SGLang files it models as 0.5.23 has them, and where an older release kept them.

Written once, interpreted concretely (Python ints) and symbolically (z3 terms); see model/ops.py.
This package imports no other layer of kvmc (docs/ARCHITECTURE.md's order), so no engine.
"""
