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

A commit of a git checkout is named `DIR@REF` (DIR any folder of the checkout's work tree, REF
anything `git rev-parse` reads: a branch, a tag, `HEAD~1`, a hash, `main@{1}`) or `@REF` (the
checkout of the current directory). A folder of that name that exists is a folder, never a ref.
The commit's package (`python/sglang/`, else `sglang/` at the top) is written with `git archive`
into a temporary folder that `trees` (a `contextlib.ExitStack` the command holds for its whole
run) removes on the way out, Ctrl-C included; the checkout itself, its index and its work tree
are only read. Its version is the tree's literal as above, else `git describe --tags` of the commit
(`sglang/_version.py` is not committed). A value that names no folder, a folder outside a git
work tree, a ref that is no commit, or a commit without the package is bad input, one line.
"""

from __future__ import annotations

import ast
import contextlib
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
    ref: str = ""  # a git commit's tree: `CHECKOUT@REF` as given (CHECKOUT absolute); `source` is its temporary copy
    commit: str = ""  # ... and the commit REF named (full hash)

    @property
    def spec(self) -> str:
        """What a command line names it by: `==V` or the tree's folder."""
        return f"=={self.version}" if self.source is None else self.source

    @property
    def pinned(self) -> str:
        """A git commit's tree as a value `target` reads again later: `CHECKOUT@HASH` (the branch
        REF named may move); empty for a release or a folder."""
        return f"{self.ref.rsplit('@', 1)[0]}@{self.commit}" if self.ref else ""

    def label(self) -> str:
        if self.source is None:
            return f"SGLang {self.version}"
        if self.ref:
            return f"SGLang source {self.ref} (commit {self.commit[:12]}, {self.version})"
        return f"SGLang source {self.source} ({self.version})"

    def mapping(self) -> str:
        """How a tree maps to a release (one line); empty for a release."""
        if self.source is None:
            return ""
        how = "is" if self.version == self.release else "maps to"
        return f"version {self.version} read from {self.version_from}; {how} release {self.release}"

    def to_dict(self) -> dict[str, str | None]:
        return {"version": self.version, "release": self.release, "source": self.source,
                "version_from": self.version_from, "ref": self.ref or None, "commit": self.commit or None}


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


def target(given: str, option: str, trees: contextlib.ExitStack | None = None) -> Target:
    """REF_OR_DIR: `==VERSION` is a release, anything else a source tree: a folder, or `DIR@REF` /
    `@REF` a git commit's (materialised under `trees`)."""
    if given.strip().startswith("=="):
        return release_target(given, option)
    return tree_target(given, option, trees)


def tree_target(given: str, option: str, trees: contextlib.ExitStack | None = None) -> Target:
    """A source folder, or a git commit's tree (`DIR@REF`, `@REF`; needs `trees`)."""
    if Path(given).expanduser().exists():
        return source_target(given, option)
    if "@" not in given:
        raise UpstreamUsageError(f"{option} {given!r}: neither ==VERSION (an installed release), an existing SGLang "
                                 "source folder, nor CHECKOUT@REF (a commit of a git checkout of SGLang)")
    if trees is None:
        raise UpstreamUsageError(f"{option} {given!r}: a git ref is not accepted here (expected a source folder)")
    return ref_target(given, option, trees)


def split_ref(given: str, option: str) -> tuple[Path, str]:
    """`DIR@REF` -> (DIR, REF), at the last `@` whose left side is an existing folder (a ref may hold
    `@`: `main@{1}`; so may a folder); `@REF` -> (the current directory, REF)."""
    for i in [i for i, c in enumerate(given) if c == "@"][::-1]:
        left, ref = given[:i], given[i + 1:]
        d = Path(left).expanduser() if left else Path.cwd()
        if d.is_dir() and ref:
            return d, ref
    left = given.split("@", 1)[0]
    if not given.split("@", 1)[1]:
        raise UpstreamUsageError(f"{option} {given!r}: expected CHECKOUT@REF with a ref after the @")
    raise UpstreamUsageError(f"{option} {given!r}: {left or '.'!r} is no folder (expected CHECKOUT@REF: a folder of "
                             "a git checkout of SGLang, @, a branch, tag or commit)")


def _git(top: Path, *argv: str, **kw: object) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(top), *argv],  # type: ignore[call-overload]
                              capture_output=True, timeout=120, **kw)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UpstreamUsageError(f"git {' '.join(argv[:2])} in {top}: {e}") from None


def ref_target(given: str, option: str, trees: contextlib.ExitStack) -> Target:
    """The tree of commit REF of the git checkout DIR (`DIR@REF`), written into a temporary folder
    that `trees` removes (module docstring). Bad input raises UpstreamUsageError, nothing left."""
    import shutil
    import tarfile
    import tempfile

    d, ref = split_ref(given, option)
    p = _git(d, "rev-parse", "--show-toplevel", text=True)
    if p.returncode != 0:
        raise UpstreamUsageError(f"{option} {given!r}: {str(d)!r} is not in a git work tree (expected CHECKOUT@REF "
                                 "with CHECKOUT a git checkout of SGLang)")
    top = Path(p.stdout.strip()).resolve()
    p = _git(top, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", text=True)
    if p.returncode != 0 or not p.stdout.strip():
        raise UpstreamUsageError(f"{option} {given!r}: {ref!r} is not a commit of the git checkout {top} "
                                 "(expected a branch, tag or commit `git rev-parse` reads)")
    commit = p.stdout.strip()
    sub = next((s for s in ("python", "") if _git(top, "cat-file", "-e", f"{commit}:{s + '/' if s else ''}"
                                                   "sglang/srt/managers/scheduler.py").returncode == 0), None)
    if sub is None:
        raise UpstreamUsageError(f"{option} {given!r}: commit {commit[:12]} of {top} holds no SGLang package (expected "
                                 "python/sglang/ or sglang/ with srt/managers/scheduler.py)")
    tmp = Path(tempfile.mkdtemp(prefix="kvmc-sglang-ref-"))
    trees.callback(shutil.rmtree, tmp, True)  # ignore_errors: removed on the way out, an interrupt included
    pkg = f"{sub}/sglang" if sub else "sglang"
    with subprocess.Popen(["git", "-C", str(top), "archive", "--format=tar", commit, "--", pkg],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as arch:
        assert arch.stdout is not None and arch.stderr is not None
        try:
            with tarfile.open(fileobj=arch.stdout, mode="r|") as tar:
                tar.extractall(tmp, filter="data")
        except tarfile.TarError as e:
            bad: str | None = str(e)
        else:
            bad = None
        err = arch.stderr.read().decode(errors="replace")
    if arch.returncode != 0 or bad is not None:
        raise UpstreamUsageError(f"{option} {given!r}: git archive of commit {commit[:12]} of {top} failed: "
                                 + ((err.strip().splitlines() or [bad or "?"])[-1]))
    parent = (tmp / sub) if sub else tmp
    version, where = _ref_version(parent, top, commit)
    return Target(version, nearest_release(version), str(parent.resolve()), where, given,
                  ref=f"{top}@{ref}", commit=commit)


def _ref_version(parent: Path, top: Path, commit: str) -> tuple[str, str]:
    """A commit's version: the tree's literal (read_version's files), else its newest `v*` tag."""
    for name in ("_version.py", "version.py"):
        f = parent / "sglang" / name
        v = _literal_version(f) if f.is_file() else None
        if v is not None:
            return v, f"sglang/{name} of commit {commit[:12]}"
    p = _git(top, "describe", "--tags", "--match", "v[0-9]*", "--abbrev=0", commit, text=True)
    tag = p.stdout.strip() if p.returncode == 0 else ""
    if tag and _VERSION.fullmatch(tag.removeprefix("v")):
        return tag.removeprefix("v"), f"git tag {tag} of commit {commit[:12]}"
    raise UpstreamUsageError(f"commit {commit[:12]} of {top}: cannot read its version (expected a v* tag before it, "
                             "or `__version__ = '...'` in sglang/version.py)")


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
