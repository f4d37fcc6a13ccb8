"""Traces: `Trace` and the concrete re-run every counterexample goes through (trace.py), ITF JSON
(itf.py), and the per-step annotations a person reads (explain.py). Imports model/ and specs/ only."""
