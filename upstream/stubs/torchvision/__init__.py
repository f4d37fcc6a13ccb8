"""kvmc's stand-in for `torchvision` (the real one pulls another torch). SGLang's
`srt/utils/common.py` imports `torchvision.io.decode_jpeg`; transformers' image utilities import
names from `torchvision.io`, `torchvision.transforms(.v2)(.functional)` once they find a
torchvision package. Every `torchvision.*` submodule is made on demand: functions raise,
CamelCase names are inert classes. Nothing here works."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

from ._stub import module_getattr

__version__ = "0.0.0+kvmc.stub"
__getattr__ = module_getattr(__name__)


class _SubmoduleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds any `torchvision.<x>` submodule and builds it as an inert package."""

    def find_spec(self, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        if fullname.startswith(__name__ + ".") and fullname != __name__ + "._stub":
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        m = types.ModuleType(spec.name)
        m.__path__ = []
        m.__getattr__ = module_getattr(spec.name)  # type: ignore[attr-defined]
        return m

    def exec_module(self, module):  # type: ignore[no-untyped-def]
        return None


if not any(isinstance(f, _SubmoduleFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _SubmoduleFinder())
