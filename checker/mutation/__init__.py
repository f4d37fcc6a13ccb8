"""Mutation testing of the model (`kvmc mutate`): mutants generated from model/'s source
(operators.py), which configs run them (coverage.py), kvmc's engines on each in a process within a
budget (runner.py), equivalence proofs (equivalence.py), the first divergence on reachable states
(diff.py), and the classification and report (mutate.py)."""
