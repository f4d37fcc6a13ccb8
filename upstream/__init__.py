"""SGLang's own code, run for real on CPU: installing releases (upstream/install.py), running
their scheduler-memory objects in a subprocess per release (upstream/worker.py), and comparing
them with kvmc's concrete model (`kvmc conform`, upstream/conform.py).

Layering: upstream/ imports model/ and specs/ (never checker/); the CLI registers its subcommands
lazily. SGLang itself is imported only inside the worker subprocess, whose PYTHONPATH selects one
release folder, the pure-Python dependencies and the stubs (upstream/stubs/).
"""
