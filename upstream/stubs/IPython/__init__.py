"""kvmc's CPU stand-in for `IPython` (`sglang/utils.py` imports `IPython.display`)."""
