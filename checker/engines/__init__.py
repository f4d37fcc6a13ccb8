"""The engines: bounded model checking (bmc.py), k-induction with Houdini and case splits
(induction.py, cone.py, proof_cache.py), the explicit-state search (explicit.py) and the random
engine (random_engine.py); the z3 unrolling they share (encode.py), the counterexample shrink
(shrink.py), the per-config orchestration of a check (run.py) and what the engines return
(results.py). Imports model/, specs/, checker.traces and checker.verdict; never the command line,
the reports or the replay."""
