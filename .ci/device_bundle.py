"""Pack what `.ci/device` needs on a lent GPU machine that cannot reach the network: kvmc's own
wheels (z3-solver, itf-py, frozendict) and, per SGLang release, the part of its installed folder
that `kvmc conform` imports, rebuilt for the GPU machine's Python (3.12).

Why a bundle: the device tool carries at most 64 MiB of untracked files and the machine has no
package registry; a whole release folder is 60-220 MB and its compiled modules are built for this
machine's Python. So the bundle holds, per release, every directory of SGLang's package from which
a conformance worker imported a module (all its .py files, not only the imported ones: a CUDA path
may import a sibling the CPU run did not), with each compiled module it imported taken from the
release's cp312 wheel; and one dependency folder with every package the workers imported (the
compiled ones from their pinned cp312 wheels, transformers only in the directories imported).

    python .ci/device_bundle.py [--releases 0.5.13 0.5.18 0.5.21 0.5.23] [--out .dev]

Needs the releases installed here (`kvmc sglang install V`) and pip's network access. Writes
.dev/whl/*.whl and .dev/sglang.tar.xz (KVMC_SGLANG_DIR layout: sglang-V/, deps-HASH/, each with
its completion marker), then prints their sizes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from upstream.install import DEPS, MARKER, default_dir, deps_dir, release_path  # noqa: E402
from upstream.releases import preset_releases  # noqa: E402

PY = "3.12"
PLATFORMS = ["manylinux_2_34_x86_64", "manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64"]
KVMC_WHEELS = ["z3-solver", "itf-py", "frozendict"]
JIT_TREES = ["sglang/jit_kernel", "sglang/kernels/jit"]
DUMP = """import atexit, os, sys
def _dump():
    with open(os.environ["KVMC_DUMP_MODULES"], "a") as f:
        f.writelines(m.__file__ + "\\n" for m in list(sys.modules.values()) if getattr(m, "__file__", None))
atexit.register(_dump)
"""


def _download(spec: str, dest: Path) -> Path:
    before = set(dest.glob("*.whl"))
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
           "--only-binary=:all:", "--python-version", PY, "--implementation", "cp", "-d", str(dest), spec]
    for p in PLATFORMS:
        cmd[-1:-1] = ["--platform", p]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"device_bundle: pip download {spec} failed: {p.stderr.strip().splitlines()[-1:]}")
    name = re.split(r"[=<>]", spec)[0].replace("-", "_").lower()
    new = [w for w in dest.glob("*.whl") if w.name.lower().startswith(name)]
    return (sorted(set(new) - before) or new)[0]


def _installed_version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


def _closure(version: str, root: Path, work: Path) -> list[str]:
    """Files of the modules a short conformance worker run imports (CPU, this machine)."""
    rel = next(r for r in preset_releases() if r.version == version)
    site = work / "dumpsite"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(DUMP)
    out = work / f"modules-{version}.txt"
    out.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*release_path(root, version), str(REPO), str(site)]),
               PYTHONHASHSEED="0", KVMC_DUMP_MODULES=str(out))
    p = subprocess.run([sys.executable, "-W", "ignore", "-m", "upstream.worker", "--version", version, "--design",
                        str(rel.preset), "--examples", "3"], env=env, capture_output=True, text=True, cwd=REPO)
    if p.returncode != 0:
        raise SystemExit(f"device_bundle: the worker for {version} failed here: {p.stderr.strip()[-400:]}")
    return sorted(set(out.read_text().split()))


def _copy_dirs(files: list[str], base: Path, dest: Path, whole: bool) -> None:
    """Copy each imported file under `base` to `dest`, and with `whole` every .py of its directory."""
    dirs = set()
    for f in files:
        if f.startswith(str(base) + os.sep):
            rel = Path(f).relative_to(base)
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            if not f.endswith(".so"):
                shutil.copy2(f, dest / rel)
            dirs.add(rel.parent)
    if whole:
        for d in dirs:
            for py in (base / d).glob("*.py"):
                shutil.copy2(py, dest / d / py.name)
            for data in (base / d).glob("*.json"):
                shutil.copy2(data, dest / d / data.name)


def _cp312_sos(wheel: Path, imported_so: list[str], dest: Path) -> None:
    """The cp312 builds of the compiled modules imported here (a cp311 build does not load there)."""
    want = {re.sub(r"\.cpython-311-x86_64-linux-gnu\.so$", "", s) for s in imported_so}
    with zipfile.ZipFile(wheel) as z:
        for n in z.namelist():
            stem = re.sub(r"\.cpython-312-x86_64-linux-gnu\.so$", "", n)
            if stem != n and stem in want:
                z.extract(n, dest)


def build(versions: list[str], out: Path) -> None:
    root = default_dir()
    whl = out / "whl"
    whl.mkdir(parents=True, exist_ok=True)
    for dist in KVMC_WHEELS:
        _download(f"{dist}=={_installed_version(dist)}", whl)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        stage = work / "sglang"
        deps_src = deps_dir(root)
        deps_dst = stage / deps_src.name
        deps_files: set[str] = set()
        for v in versions:
            files = _closure(v, root, work)
            src = root / f"sglang-{v}"
            dst = stage / src.name
            _copy_dirs(files, src, dst, whole=True)
            for tree in JIT_TREES:  # their loaders find their C++ sources by path at import (include/, csrc/)
                if (src / tree).is_dir():
                    shutil.copytree(src / tree, dst / tree, dirs_exist_ok=True,
                                    ignore=shutil.ignore_patterns("__pycache__", "benchmark", "tests"))
            so = [str(Path(f).relative_to(src)) for f in files if f.startswith(str(src)) and f.endswith(".so")]
            if so:
                _cp312_sos(_download(f"sglang=={v}", work), so, dst)
            (dst / MARKER).write_text("complete (device bundle)\n")
            deps_files |= {f for f in files if f.startswith(str(deps_src) + os.sep)}
        # dependencies: top-level packages imported; compiled ones from their cp312 wheels
        tops = {Path(f).relative_to(deps_src).parts[0] for f in deps_files}
        tops = {t[:-3] if t.endswith(".py") else t for t in tops}
        pins = {re.split("==", d)[0].replace("-", "_").lower(): d for d in DEPS}
        deps_dst.mkdir(parents=True)
        for info in deps_src.glob("*.dist-info"):  # importlib.metadata reads them (transformers checks versions)
            shutil.copytree(info, deps_dst / info.name)
        for top in sorted(tops):
            path = deps_src / top
            compiled = [f for f in (path.rglob("*.so") if path.is_dir() else []) if "cpython-311" in f.name]
            if compiled:
                dist = _dist_of(deps_src, top)
                w = _download(pins[dist], work)
                with zipfile.ZipFile(w) as z:
                    z.extractall(deps_dst, [n for n in z.namelist() if n.split("/")[0] in (top, f"{top}.libs",
                                                                                          f"{dist}.libs")])
            elif top == "transformers":
                _copy_dirs(sorted(f for f in deps_files if Path(f).relative_to(deps_src).parts[0] == top), deps_src, deps_dst,
                           whole=True)
            elif path.is_dir():
                shutil.copytree(path, deps_dst / top, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
            else:
                shutil.copy2(deps_src / f"{top}.py", deps_dst / f"{top}.py")
        (deps_dst / MARKER).write_text("complete (device bundle)\n")
        for pyc in stage.rglob("__pycache__"):
            shutil.rmtree(pyc, ignore_errors=True)
        target = out / "sglang.tar.xz"
        with tarfile.open(target, "w:xz", preset=9) as t:
            t.add(stage, arcname="sglang")
    for f in sorted([*whl.glob("*.whl"), out / "sglang.tar.xz"]):
        print(f"{f.stat().st_size / 2**20:7.1f} MiB  {f}")


def _dist_of(deps: Path, top: str) -> str:
    """The pinned distribution whose RECORD lists the top-level package `top`."""
    for info in deps.glob("*.dist-info"):
        rec = info / "RECORD"
        if rec.exists() and any(line.startswith(f"{top}/") for line in rec.read_text().splitlines()):
            return info.name.split("-")[0].lower()
    raise SystemExit(f"device_bundle: no installed distribution provides {top!r} in {deps}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", nargs="+", default=["0.5.13", "0.5.18", "0.5.21", "0.5.23"])
    ap.add_argument("--out", default=str(REPO / ".dev"))
    a = ap.parse_args()
    build(a.releases, Path(a.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
