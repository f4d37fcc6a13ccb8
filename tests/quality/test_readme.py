"""The README is a user's first page: it fits on a few screens, and its commands run as shown.

Every `kvmc` command in a fenced `sh` block runs in a scratch directory, each block's commands in
order, unless its line ends in `# minutes`. The blocks run side by side, except that a block naming
`kvmc-out/` starts after the quick start's block (its check writes the trace those commands read);
the `# minutes` commands, and every `kvmc` command in the tables, are parsed by kvmc's own parser and
their designs, fixes, mutants, configs and properties must exist. A command that runs must exit 0,
or 1 where it reports a violation, and never with a usage error, an internal error or a traceback.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_LINES = 250
LONG = "# minutes"


def fenced_blocks(text: str) -> list[list[tuple[str, bool]]]:
    """Per fenced sh block, in order: (the `kvmc ...` command, whether the README marks it long) per line."""
    out: list[list[tuple[str, bool]]] = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, flags=re.S | re.M):
        cmds: list[tuple[str, bool]] = []
        for line in block.splitlines():
            line, _, comment = line.partition(" #")
            for part in line.split("&&"):  # `kvmc sglang install V && kvmc explore ...`: two commands
                part = part.strip()
                if part.startswith("kvmc "):
                    cmds.append((part, LONG in "#" + comment))
        out.append(cmds)
    return out


def fenced_commands(text: str) -> list[tuple[str, bool]]:
    """(the `kvmc ...` command, whether the README marks it long) per fenced sh line, in order."""
    return [c for block in fenced_blocks(text) for c in block]


def table_commands(text: str) -> list[str]:
    """Every `kvmc ... --option ...` command written in backticks outside the fenced blocks (a bare
    `kvmc list` names a command; `kvmc sglang install V` a pattern)."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return [c.strip() for c in re.findall(r"`(kvmc [^`]+)`", prose) if " --" in c]


def check_names(argv: list[str]) -> None:
    """The command parses with kvmc's parser; what it names exists (checker/designs.py::build)."""
    from checker.cli.app import parser
    from checker.designs import build
    from specs.configs import CONFIGS
    from specs.liveness import LIVENESS
    from specs.properties import PROPERTIES

    args = parser(argv).parse_args(argv)
    if argv[0] in ("check", "review", "graph"):
        build(getattr(args, "design", None) or "current", getattr(args, "without", None) or [],
              getattr(args, "with_", None) or [], getattr(args, "mutant", None) or [])
        for c in getattr(args, "config", None) or []:
            assert c in CONFIGS, (argv, c)
        for p in getattr(args, "property", None) or []:
            assert p in PROPERTIES or p in LIVENESS, (argv, p)


def test_readme_fits_on_a_few_screens() -> None:
    n = len(README.read_text().splitlines())
    assert n <= MAX_LINES, f"README.md has {n} lines; keep it <= {MAX_LINES} (reference goes to docs/)"


def test_the_readme_has_commands_to_run() -> None:
    cmds = fenced_commands(README.read_text())
    assert cmds and cmds[0][0].startswith("kvmc check"), cmds[:1]  # the quick start's check comes first
    assert any(long for _, long in cmds) and any(not long for _, long in cmds)


@pytest.mark.parametrize("cmd", table_commands(README.read_text()) + [c for c, _ in fenced_commands(README.read_text())])
def test_every_readme_command_parses_and_names_what_exists(cmd: str) -> None:
    check_names(shlex.split(cmd)[1:])


def test_a_command_naming_what_does_not_exist_is_caught() -> None:
    from checker.cli.common import UsageError
    from checker.designs import DesignError

    with pytest.raises(DesignError):
        check_names(["check", "--without", "no_such_fix"])
    with pytest.raises(AssertionError):
        check_names(["check", "--config", "hybrid_swa", "--property", "no_such_property"])
    with pytest.raises(UsageError):
        check_names(["check", "--no-such-option"])


def _kvmc() -> list[str]:
    exe = Path(sys.executable).with_name("kvmc")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "checker.cli"]


@pytest.fixture(scope="module")
def sglang_installed() -> None:
    from upstream.install import default_dir, install

    versions = sorted({m for c, _ in fenced_commands(README.read_text()) for m in re.findall(r"sglang==(\S+)", c)})
    install(versions, default_dir(), say=lambda m: None)


def test_the_readme_commands_run_as_shown(tmp_path: Path, sglang_installed: None) -> None:
    from concurrent.futures import ThreadPoolExecutor

    (tmp_path / "counterexamples").symlink_to(ROOT / "counterexamples")
    env = dict(os.environ, NO_COLOR="1")
    blocks = [[c for c, long in b if not long] for b in fenced_blocks(README.read_text())]
    blocks = [b for b in blocks if b]
    assert blocks and blocks[0][0].startswith("kvmc check"), blocks[:1]

    def run(block: list[str]) -> list[tuple[str, int, str]]:
        done = []
        for cmd in block:  # in order: `patch check` reads the file `patch new` writes
            p = subprocess.run(_kvmc() + shlex.split(cmd)[1:], cwd=tmp_path, env=env, capture_output=True, text=True,
                               timeout=600)
            done.append((cmd, p.returncode, p.stderr))
            if p.returncode not in (0, 1):
                break
        return done

    first, rest = blocks[0], blocks[1:]
    later = [b for b in rest if any("kvmc-out/" in c for c in b)]  # they read what the quick start's check writes
    with ThreadPoolExecutor(max_workers=len(blocks)) as pool:
        now = [pool.submit(run, b) for b in rest if b not in later]
        results = run(first)
        after = [pool.submit(run, b) for b in later]
        results += [r for f in now + after for r in f.result()]
    ran = []
    for cmd, rc, err in results:
        assert rc in (0, 1) and "Traceback" not in err, (cmd, rc, err[-2000:])
        ran.append(cmd)
    quick = tmp_path / "kvmc-out/current-without-session_active/sessions/busy_check_sound.itf.json"
    assert quick.exists()  # the path the quick start's paragraph names
    assert (tmp_path / "swa_reserve.py").exists() and (tmp_path / "trace.html").exists()
    assert len(ran) >= 6, ran


def _table_names(text: str, header: str) -> set[str]:
    """The backticked names in the first cell of each row of the table whose header row starts `| header |`."""
    lines = text.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith(f"| {header} |"))
    names: set[str] = set()
    for line in lines[i + 2:]:
        if not line.startswith("|"):
            break
        names |= set(re.findall(r"`([a-z0-9_]+)`", line.split("|")[1]))
    return names


def test_the_config_and_property_tables_name_every_config_and_property() -> None:
    from specs.configs import CONFIGS
    from specs.liveness import LIVENESS
    from specs.properties import PROPERTIES

    text = README.read_text()
    assert _table_names(text, "config") == set(CONFIGS)
    assert _table_names(text, "property") == set(PROPERTIES) | set(LIVENESS)
