"""`kvmc sglang install VERSION... [--dir DIR]`: SGLang releases on a CPU-only machine.

Layout under DIR (default `$KVMC_SGLANG_DIR`, else `~/.cache/kvmc/sglang`):

    sglang-<V>/      `pip install --no-deps --target` of the release's wheel (one folder each)
    deps-<hash>/     the pure-Python dependencies SGLang's scheduler-memory imports need, pinned
                     (DEPS below), also `--no-deps`: nothing here can pull torch, triton,
                     torchvision, flashinfer, sgl-kernel or a CUDA package
    (stubs)          kvmc's own stand-ins, in the repository (upstream/stubs/), never copied

A release is selected with `PYTHONPATH=DIR/sglang-<V>:DIR/deps-<hash>:upstream/stubs`
(`release_path`); one virtualenv (torch's CPU pin) serves every release.

Idempotent: a folder that exists is complete (it is created under a temporary name and renamed
only after pip and an import check succeeded), so a second run has nothing to do and says so.
Atomic: a failed or interrupted install removes its temporary folder; nothing half-installed is
left. `$KVMC_SGLANG_WHEELS` (a folder of downloaded wheels) is passed to pip as `--find-links`, for
offline or faster installs; otherwise pip asks the package registry.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Sequence

from .errors import UpstreamUsageError
from .releases import release

STUBS = Path(__file__).resolve().parent / "stubs"

# Pure-Python (or CPU-only binary) packages the imports of `managers/schedule_policy.py`,
# `mem_cache/*` and `server_args.py` need, found by importing them release by release
# (0.5.10.post1 .. 0.5.23). Pinned so that every machine gets the same set; `--no-deps` so that
# none of them pulls anything else. xgrammar (0.5.18+, `function_call/inkling_detector.py`)
# needs the real apache-tvm-ffi, a CPU wheel.
DEPS: tuple[str, ...] = (
    "aiohappyeyeballs==2.7.1", "aiohttp==3.14.5", "aiosignal==1.4.0", "annotated-types==0.8.0",
    "anyio==4.16.0", "apache-tvm-ffi==0.1.15.post2", "attrs==26.1.0", "certifi==2026.10.19.post1",
    "compressed-tensors==0.18.0", "dill==0.4.1", "distro==1.9.0", "einops==0.8.2", "frozenlist==1.8.0",
    "gguf==0.19.0", "h11==0.16.0", "httpcore==1.0.9", "httpx==0.28.1", "huggingface-hub==1.33.0",
    "idna==3.20", "loguru==0.7.3", "msgspec==0.22.0", "multidict==7.2.1", "openai==2.8.0",
    "orjson==3.13.0", "partial-json-parser==0.2.1.1.post7", "propcache==0.5.4", "psutil==7.2.2",
    "pybase64==1.5.1", "pydantic==2.14.4", "pydantic-core==2.50.5", "pyyaml==6.0.4", "pyzmq==27.3.0",
    "regex==2026.11.19", "requests==2.34.2", "safetensors==0.8.0", "sentencepiece==0.2.3",
    "sniffio==1.3.1", "starlette==1.10.0", "tokenizers==0.22.2", "tqdm==4.70.1",
    "transformers==5.6.0", "truststore==0.10.5", "typing-inspection==0.4.5", "urllib3==2.8.0",
    "xgrammar==0.2.8", "yarl==1.25.1",
)
# Also needed, and installed into deps only when the running environment lacks them (torch and
# matplotlib usually bring them; a second copy on PYTHONPATH would shadow the environment's).
ENV_DEPS: dict[str, str] = {
    "numpy": "numpy", "packaging": "packaging", "PIL": "pillow", "filelock": "filelock",
    "fsspec": "fsspec", "typing_extensions": "typing-extensions", "jinja2": "jinja2", "markupsafe": "markupsafe",
}
NEVER = ("torch", "triton", "torchvision", "flashinfer", "sgl-kernel", "sgl_kernel", "nvidia-")

# what an installed release must import (checked before the folder is renamed into place)
IMPORT_CHECK = (
    "import sglang.srt.managers.schedule_policy, sglang.srt.mem_cache.memory_pool, "
    "sglang.srt.mem_cache.swa_memory_pool, sglang.srt.mem_cache.radix_cache, sglang.srt.server_args"
)
MARKER = ".kvmc-complete"


def default_dir() -> Path:
    return Path(os.environ.get("KVMC_SGLANG_DIR") or Path.home() / ".cache" / "kvmc" / "sglang")


def _missing_env_deps() -> list[str]:
    import importlib.util

    return sorted(pkg for mod, pkg in ENV_DEPS.items() if importlib.util.find_spec(mod) is None)


def deps_dir(root: Path) -> Path:
    """The dependency folder for this DEPS list (a new list gets a new folder)."""
    key = hashlib.sha256("\n".join((*DEPS, *_missing_env_deps())).encode()).hexdigest()[:10]
    return root / f"deps-{key}"


def release_dir(root: Path, version: str) -> Path:
    return root / f"sglang-{release(version).version}"


def is_installed(root: Path, version: str) -> bool:
    return (release_dir(root, version) / MARKER).exists()


def release_path(root: Path, version: str) -> list[str]:
    """sys.path entries, in order, that select `version` (release, dependencies, stubs)."""
    d = release_dir(root, version)
    if not (d / MARKER).exists():
        raise UpstreamUsageError(
            f"SGLang {version} is not installed under {root}; run `kvmc sglang install {version} --dir {root}`"
        )
    deps = deps_dir(root)
    if not (deps / MARKER).exists():
        raise UpstreamUsageError(f"the dependencies are not installed under {deps}; run `kvmc sglang install {version} --dir {root}`")
    return [str(d), str(deps), str(STUBS)]


def release_env(path: Sequence[str], device: str = "cpu") -> dict[str, str]:
    """The environment of a child that imports a release: PYTHONPATH = `path` then the repository,
    hash seed 0. On `cpu` the child sees no GPU (CUDA_VISIBLE_DEVICES empty): SGLang picks its
    import branch by the host (`is_cuda()`), and on a GPU host the CUDA branch pulls CUDA-only
    extensions (`sgl_kernel.quantization`, flashinfer) kvmc never installs; the cpu rows and the
    scheduler replay are meant to run what a GPU-less host runs, the same on every machine."""
    repo = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*path, str(repo)]), PYTHONHASHSEED="0")
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def run_in_release(path: Sequence[str], args: Sequence[str], device: str = "cpu", served: bool = False) -> dict | str:
    """`python -W ignore ARGS` in a release's environment (`release_env`), as the conformance worker
    and the kernel check run: its last stdout line as JSON, or why it failed (the exit status and
    the last 15 lines of its stderr). `served` (ARGS = `-m MODULE ...` of a worker with `--serve`): inside
    `serve.shared_workers()` on cpu, the release's server of MODULE answers ARGS instead (upstream/serve.py)."""
    import json

    from . import serve

    repo = Path(__file__).resolve().parent.parent
    env = release_env(path, device)
    if served and device == "cpu" and serve.active() and list(args[:1]) == ["-m"]:
        out, rc, err = serve.ask([sys.executable, "-W", "ignore", *args[:2], "--serve"], env, str(repo), list(args[2:]))
        if rc != 0 or out is None:
            tail = "\n".join(err.strip().splitlines()[-15:])
            return f"worker exited {rc}:\n{tail}"
        return out
    p = subprocess.run([sys.executable, "-W", "ignore", *args], capture_output=True, text=True, env=env, cwd=str(repo))
    if p.returncode != 0:
        tail = "\n".join(p.stderr.strip().splitlines()[-15:])
        return f"worker exited {p.returncode}:\n{tail}"
    return json.loads(p.stdout.strip().splitlines()[-1])


def _pip(args: Sequence[str]) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", *args]
    wheels = os.environ.get("KVMC_SGLANG_WHEELS")
    if wheels:
        cmd[5:5] = ["--find-links", wheels]
    return subprocess.run(cmd, capture_output=True, text=True)


def _pip_error(p: subprocess.CompletedProcess) -> str:
    lines = [ln.strip() for ln in (p.stderr + p.stdout).splitlines() if ln.strip().startswith("ERROR")]
    return lines[0] if lines else (p.stderr.strip().splitlines() or ["pip failed"])[-1]


def _atomic_folder(final: Path, fill: Callable[[Path], None]) -> None:
    """Create `final` by filling a temporary sibling and renaming it; on any failure (or Ctrl-C)
    the temporary folder is removed and `final` does not exist."""
    tmp = final.parent / f".partial-{final.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        fill(tmp)
        (tmp / MARKER).write_text("complete\n")
        if final.exists():  # an incomplete leftover of an older layout: replace it
            shutil.rmtree(final)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def install_deps(root: Path, say: Callable[[str], None]) -> Path:
    d = deps_dir(root)
    if (d / MARKER).exists():
        return d
    pkgs = [*DEPS, *_missing_env_deps()]
    bad = [p for p in pkgs if p.lower().startswith(NEVER)]
    if bad:  # a guard against an edit of DEPS that would bring CUDA in
        raise UpstreamUsageError(f"DEPS names {bad}, which kvmc never installs (they pull CUDA or another torch)")
    say(f"installing {len(pkgs)} pure-Python dependencies into {d}")

    def fill(tmp: Path) -> None:
        p = _pip(["--target", str(tmp), *pkgs])
        if p.returncode != 0:
            raise UpstreamUsageError(f"could not install SGLang's dependencies into {d}: {_pip_error(p)}")

    _atomic_folder(d, fill)
    return d


def _import_check(folder: Path, deps: Path) -> str | None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(folder), str(deps), str(STUBS)]))
    p = subprocess.run([sys.executable, "-W", "ignore", "-c", IMPORT_CHECK], capture_output=True, text=True, env=env)
    if p.returncode == 0:
        return None
    return (p.stderr.strip().splitlines() or ["import failed"])[-1]


def install(versions: Sequence[str], root: Path | None = None, say: Callable[[str], None] = print) -> list[str]:
    """Install each release (idempotent, atomic). Returns the versions newly installed.
    Bad input (unknown release, wheel not available or not importable): `UpstreamUsageError`."""
    root = Path(root) if root is not None else default_dir()
    rels = [release(v) for v in versions]  # every name checked before anything is installed
    root.mkdir(parents=True, exist_ok=True)
    todo = [r for r in rels if not is_installed(root, r.version)]
    for r in rels:
        if r not in todo:
            say(f"SGLang {r.version}: already installed in {release_dir(root, r.version)}")
    if not todo and (deps_dir(root) / MARKER).exists():
        say("nothing to do")
        return []
    deps = install_deps(root, say)
    done = []
    for r in todo:
        final = release_dir(root, r.version)
        say(f"SGLang {r.version}: installing into {final}")

        def fill(tmp: Path, r=r) -> None:
            p = _pip(["--target", str(tmp), f"sglang=={r.version}"])
            if p.returncode != 0:
                raise UpstreamUsageError(f"could not install sglang=={r.version}: {_pip_error(p)}")
            err = _import_check(tmp, deps)
            if err is not None:
                raise UpstreamUsageError(f"sglang=={r.version} installed but does not import on CPU: {err}")

        _atomic_folder(final, fill)
        done.append(r.version)
    return done


def cmd_install(args) -> int:  # type: ignore[no-untyped-def]
    from .errors import EXIT_USAGE

    try:
        install(args.versions, Path(args.dir) if args.dir else None)
    except UpstreamUsageError as e:
        print(f"kvmc: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    return 0
