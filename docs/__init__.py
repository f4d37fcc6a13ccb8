"""docs/ as a package: the generator of the reference pages' tables (docs/tables.py).

`python -m docs` rewrites every generated table in place; `python -m docs --check` writes nothing and
exits 1 when a table is stale or a reference page carries a dated run log (those go to docs/log/).
"""
