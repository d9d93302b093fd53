"""Every package the code imports is declared, and every declared package is pinned.

The code (engines, registry, canary, gate, evalhub, workers, bench, manage.py) may import only what
requirements.in names; the tests also what requirements-dev.in names. An import name is mapped to
its distribution with `importlib.metadata.packages_distributions()` (`sklearn` -> scikit-learn), so a
package that arrives only through another one's dependencies is caught."""

import ast
import importlib.metadata
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
CODE = ["engines", "registry", "canary", "gate", "evalhub", "workers", "bench"]
FIRST_PARTY = {*CODE, "tests", "manage"}


def declared(path: Path) -> set[str]:
    """The distributions a requirements file names (comments and pip options aside)."""
    lines = (line.split("#")[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return {canonicalize_name(Requirement(line).name) for line in lines if line and not line.startswith("-")}


def imported(paths: list[Path]) -> dict[str, str]:
    """Top-level third-party import names -> one file that imports it (imports inside functions too)."""
    found: dict[str, str] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.partition(".")[0]
                if top not in sys.stdlib_module_names and top not in FIRST_PARTY:
                    found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def undeclared(imports: dict[str, str], allowed: set[str]) -> list[str]:
    distributions = importlib.metadata.packages_distributions()
    missing = []
    for name, where in sorted(imports.items()):
        names = {canonicalize_name(d) for d in distributions.get(name, [])}
        if not names & allowed:
            missing.append(f"{name} ({where}; distribution {', '.join(sorted(names)) or 'not installed'})")
    return missing


def python_files(*folders: str) -> list[Path]:
    return [path for folder in folders for path in sorted((ROOT / folder).rglob("*.py"))]


def test_the_code_imports_only_what_requirements_in_declares():
    imports = imported([*python_files(*CODE), ROOT / "manage.py"])
    assert {"django", "httpx", "numpy", "pydantic"} <= set(imports)  # the scan sees the code's imports
    assert undeclared(imports, declared(ROOT / "requirements.in")) == []


def test_the_tests_import_only_what_the_two_requirements_files_declare():
    allowed = declared(ROOT / "requirements.in") | declared(ROOT / "requirements-dev.in")
    assert undeclared(imported(python_files("tests")), allowed) == []


def test_every_declared_package_is_pinned_once_in_its_lock():
    runtime, dev = declared(ROOT / "requirements.txt"), declared(ROOT / "requirements-dev.txt")
    assert declared(ROOT / "requirements.in") - runtime == set()
    assert declared(ROOT / "requirements-dev.in") - (runtime | dev) == set()
    assert runtime & dev == set()  # the dev lock adds to the runtime one, never repins it
    for lock in ("requirements.txt", "requirements-dev.txt"):
        for line in (ROOT / lock).read_text(encoding="utf-8").splitlines():
            assert line.startswith("#") or "==" in line, f"{lock}: {line!r} is not pinned"


def test_the_production_image_installs_no_development_tool():
    lines = (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines()
    instructions = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    assert "-r requirements.txt" in instructions and "requirements-dev" not in instructions
    runtime = declared(ROOT / "requirements.txt")
    assert {"pytest", "mypy", "ruff", "selenium", "schemathesis", "import-linter"} & runtime == set()
