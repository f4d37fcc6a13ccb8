"""Which SGLang a command runs: an installed release (`==VERSION`) or a developer's source tree
(`--sglang-source DIR`), as one `Target` (parent side: reads the tree's files, imports no SGLang).

A source tree is DIR with `python/sglang/` (an SGLang checkout's root) or DIR with `sglang/` (a
folder holding the package, e.g. DIR = the checkout's `python/`); the package must have
`__init__.py` and `srt/managers/scheduler.py`. The worker imports SGLang from that folder, ahead of
kvmc's pinned dependencies, the scheduler extras and kvmc's CPU stubs (`worker_path`): whatever the
tree holds, uncommitted edits included, is what runs.

Its version is read from the tree, never imported: `sglang/_version.py` (written by
setuptools-scm on `pip install -e`, e.g. '0.5.13' or '0.5.14.dev12+g1a2b3c'), else a literal
`__version__ = "..."` in `sglang/version.py`, else the newest `v*` tag `git describe` finds for
the tree. It is mapped to a release the way an installed release is: the newest release the
scheduler adapters were run on (upstream/sched/releases.py::ADAPTED) at or before the tree's
version (a `.devN` of X.Y.Z comes before X.Y.Z: setuptools-scm names the commits after tag
X.Y.(Z-1) so), whose revert texts (`--revert`) apply; then `upstream/explore.py::preset_for` of
that release (its own preset, else the newest preset before it) gives the model preset whose
parameter constraints bound the walks. A tree older than every adapted release is bad input; a
newer one maps to the newest adapted release and says so.
"""

from __future__ import annotations

import ast
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import UpstreamUsageError

_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?(?:\.?dev(\d+))?(?:[+].*)?")


@dataclass(frozen=True)
class Target:
    """One SGLang to run: a release (`source` None) or a source tree."""

    version: str  # the release, or the tree's own version string
    release: str  # the adapted release it maps to (its revert texts, its preset)
    source: str | None = None  # the folder holding the `sglang` package (absolute), for a tree
    version_from: str = ""  # where the tree's version was read
    given: str = ""  # what the user typed

    @property
    def spec(self) -> str:
        """What a command line names it by: `==V` or the tree's folder."""
        return f"=={self.version}" if self.source is None else self.source

    def label(self) -> str:
        if self.source is None:
            return f"SGLang {self.version}"
        return f"SGLang source {self.source} ({self.version})"

    def mapping(self) -> str:
        """How a tree maps to a release (one line); empty for a release."""
        if self.source is None:
            return ""
        how = "is" if self.version == self.release else "maps to"
        return f"version {self.version} read from {self.version_from}; {how} release {self.release}"

    def to_dict(self) -> dict[str, str | None]:
        return {"version": self.version, "release": self.release, "source": self.source,
                "version_from": self.version_from}


def version_key(v: str) -> tuple[float, ...]:
    """A sortable key: 0.5.13.dev4 < 0.5.13 < 0.5.13.post1 < 0.5.13.post2.dev1 < 0.5.13.post2."""
    m = _VERSION.fullmatch(v.strip().removeprefix("v"))
    if not m:
        raise UpstreamUsageError(f"cannot read SGLang version {v!r} (expected like 0.5.13, 0.5.10.post1 or 0.5.14.dev3)")
    a, b, c, post, dev = m.groups()
    p = float(post or 0)
    if dev is not None:
        p -= 0.5  # a dev release comes before the release (or post release) it leads to
    return (int(a), int(b), int(c), p)


def package_parent(d: Path) -> Path | None:
    """The folder holding the `sglang` package of tree `d`, or None when `d` is no SGLang tree."""
    for parent in (d / "python", d):
        pkg = parent / "sglang"
        if (pkg / "__init__.py").is_file() and (pkg / "srt" / "managers" / "scheduler.py").is_file():
            return parent
    return None


def read_version(parent: Path) -> tuple[str, str]:
    """(version, where it was read) of the package under `parent`; UpstreamUsageError when none."""
    pkg = parent / "sglang"
    for name in ("_version.py", "version.py"):
        f = pkg / name
        if not f.is_file():
            continue
        v = _literal_version(f)
        if v is not None:
            return v, str(f)
    try:
        p = subprocess.run(["git", "-C", str(pkg), "describe", "--tags", "--match", "v[0-9]*", "--abbrev=0"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        p = None
    if p is not None and p.returncode == 0 and _VERSION.fullmatch(p.stdout.strip().removeprefix("v")):
        return p.stdout.strip().removeprefix("v"), f"git tag {p.stdout.strip()} of {pkg}"
    raise UpstreamUsageError(f"{pkg}: cannot read its version (expected `__version__ = '...'` in sglang/_version.py, "
                             "as `pip install -e python` writes it, or in sglang/version.py, or a v* git tag)")


def _literal_version(f: Path) -> str | None:
    try:
        tree = ast.parse(f.read_text(errors="replace"))
    except (SyntaxError, ValueError, OSError):
        return None
    for node in tree.body:  # module level only: version.py's fallbacks sit inside try blocks
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            names = {t.id for t in node.targets if isinstance(t, ast.Name)}
            if names & {"__version__", "version"} and _VERSION.fullmatch(node.value.value.strip()):
                return node.value.value.strip()
    return None


def nearest_release(version: str) -> str:
    """The newest adapted release at or before `version` (bad input when it is older than all)."""
    from .sched.releases import ADAPTED

    key = version_key(version)
    older = [r for r in ADAPTED if version_key(r) <= key]
    if not older:
        raise UpstreamUsageError(f"SGLang {version}: older than every release the scheduler adapters were run on "
                                 f"({', '.join(ADAPTED)})")
    return max(older, key=version_key)


def source_target(given: str, option: str = "--sglang-source") -> Target:
    """A source tree named on the command line, checked: bad input is one line naming it."""
    d = Path(given).expanduser()
    parent = package_parent(d) if d.is_dir() else None
    if parent is None:
        raise UpstreamUsageError(f"{option} {given!r}: not an SGLang source tree (expected a folder with "
                                 "python/sglang/ or sglang/, holding __init__.py and srt/managers/scheduler.py)")
    version, where = read_version(parent)
    return Target(version, nearest_release(version), str(parent.resolve()), where, given)


def release_target(given: str, option: str = "--sglang") -> Target:
    """`==VERSION` (or `VERSION`): an installed release with a scheduler adapter."""
    from .sched import releases

    spec = given.strip()
    try:
        version = releases.parse_against(spec[2:] if spec.startswith("==") else spec)
    except UpstreamUsageError:
        raise UpstreamUsageError(f"{option} {spec!r}: expected ==VERSION, e.g. ==0.5.13 (an installed release)") from None
    releases.adapter(version)
    return Target(version, version, None, "", given)


def target(given: str, option: str) -> Target:
    """REF_OR_DIR: `==VERSION` is a release, anything else a source tree."""
    if given.strip().startswith("=="):
        return release_target(given, option)
    if not Path(given).expanduser().exists():
        raise UpstreamUsageError(f"{option} {given!r}: neither ==VERSION (an installed release) nor an existing "
                                 "SGLang source folder")
    return source_target(given, option)


def worker_path(root: Path, t: Target) -> list[str]:
    """sys.path of a worker that imports `t`: the release or the tree, then the dependencies, the
    scheduler extras and the stubs (upstream/sched/replay.py::worker_path for a release)."""
    from .install import MARKER, STUBS, deps_dir
    from .sched.replay import extras_dir
    from .sched.replay import worker_path as release_worker_path

    if t.source is None:
        return release_worker_path(root, t.version)
    deps, extras = deps_dir(root), extras_dir(root)
    if not (deps / MARKER).exists() or not (extras / MARKER).exists():
        raise UpstreamUsageError(f"SGLang's dependencies are not installed under {root} (a source tree needs them too); "
                                 f"run `kvmc sglang install {t.release} --dir {root}` and "
                                 f"`kvmc replay --against sglang=={t.release} --install ...` once")
    return [t.source, str(deps), str(extras), str(STUBS)]


def tree_from_release(root: Path, version: str, dest: Path) -> Path:
    """A source tree `dest/python/sglang/` holding an installed release's package (hard links where
    the file system allows, else copies; an edit must replace a file, never write through it).
    What the tests and bench/explore.py use as "a developer's checkout". Returns `dest`."""
    import os
    import shutil

    from .install import release_dir

    src = release_dir(root, version) / "sglang"
    if not src.is_dir():
        raise UpstreamUsageError(f"SGLang {version} is not installed under {root}; run `kvmc sglang install {version}`")

    def link(a: str, b: str) -> None:
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)

    (dest / "python").mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, dest / "python" / "sglang", copy_function=link)
    return dest
