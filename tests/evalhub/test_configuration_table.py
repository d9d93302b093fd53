"""The configuration table (docs/configuration.md) names every environment variable the code reads, and
nothing it no longer reads. The reads are found in the source, not listed by hand: `os.environ.get`,
`os.getenv`, `os.environ[...]`, `os.environ.setdefault` (the operator's value wins) and any helper
that passes its argument to one of them (`env_bool`, `env_list`, the beat schedule's `_every`), in
the packages, and `${NAME:-default}` in the shell scripts under bin/."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("evalhub", "registry", "canary", "gate", "engines", "workers")
TABLE = ROOT / "docs" / "configuration.md"
NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


def _python_files() -> list[Path]:
    files = [ROOT / "manage.py"]
    for package in PACKAGES:
        files += [p for p in (ROOT / package).rglob("*.py") if "migrations" not in p.parts]
    return files


def _is_environ(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def _read_argument(node: ast.AST) -> ast.expr | None:
    """The name argument of an environment read: os.environ.get(x), os.getenv(x), os.environ[x]."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        func = node.func
        if func.attr in ("get", "setdefault") and _is_environ(func.value):
            return node.args[0]
        if func.attr == "getenv":
            return node.args[0]
    if isinstance(node, ast.Subscript) and _is_environ(node.value):
        return node.slice
    return None


def _helpers(trees: list[ast.Module]) -> set[str]:
    """Functions that read the environment variable named by one of their parameters."""
    names = set()
    for tree in trees:
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef):
                continue
            params = {a.arg for a in function.args.args + function.args.kwonlyargs}
            for node in ast.walk(function):
                argument = _read_argument(node)
                if isinstance(argument, ast.Name) and argument.id in params:
                    names.add(function.name)
    return names


def _constant(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.match(node.value):
        return node.value
    return None


def variables_read() -> dict[str, set[str]]:
    """Each environment variable the code reads, with the files that read it."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in _python_files()}
    helpers = _helpers(list(trees.values()))
    found: dict[str, set[str]] = {}
    for path, tree in trees.items():
        for node in ast.walk(tree):
            name = _constant(_read_argument(node))
            if name is None and isinstance(node, ast.Call) and node.args:
                func = node.func
                called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if called in helpers:
                    name = _constant(node.args[0])
            if name:
                found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    for script in (ROOT / "bin").iterdir():
        for name in re.findall(r"\$\{([A-Z][A-Z0-9_]*):?-", script.read_text(encoding="utf-8")):
            found.setdefault(name, set()).add(str(script.relative_to(ROOT)))
    return found


def variables_documented() -> set[str]:
    """The names in the first column of the tables in docs/configuration.md."""
    names = set()
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        cells = line.split("|")
        if line.startswith("|") and len(cells) > 2:
            names.update(n for n in re.findall(r"`([^`]+)`", cells[1]) if NAME.match(n))
    return names


def test_the_reads_are_found():
    # The scan itself: a read through a settings helper, a beat interval, a shell default, a CLI default.
    read = variables_read()
    for name in (
        "DEBUG",
        "EVALHUB_OUTBOUND_ALLOW_NETWORKS",
        "EVALHUB_PROBE_INTERVAL_SECONDS",
        "EVALHUB_PORT",
    ):
        assert name in read, name
    assert "evalhub/cli.py" in read["EVALHUB_SERVER"]


def test_every_setting_the_code_reads_is_in_the_configuration_table():
    read, documented = variables_read(), variables_documented()
    missing = {name: sorted(files) for name, files in read.items() if name not in documented}
    assert not missing, f"read by the code but not in docs/configuration.md: {missing}"
    stale = sorted(documented - set(read))
    assert not stale, f"in docs/configuration.md but read nowhere: {stale}"
