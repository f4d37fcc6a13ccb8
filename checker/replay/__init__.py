"""Replay as a refinement check: a trace on kvmc's torch pool (pool.py) and the regression corpus
that replays (regen.py). Imports the engines, traces and pool/; never the command line."""
