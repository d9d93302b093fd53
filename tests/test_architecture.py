"""The floor plan holds: the import-linter contracts of pyproject.toml, no import cycle among the
project's modules (imports inside functions count), and pure packages that import on their own."""

import subprocess
import sys
from pathlib import Path

import grimp
import networkx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engines", "registry", "canary", "gate", "evalhub", "workers")
# No Django, no Celery: each imports (with all its modules) in a bare interpreter.
PURE = (
    "engines.stats",
    "engines.routing",
    "engines.perturbation",
    "engines.backends",
    "engines.scoring",
    "engines.embeddings",
    "engines.training",
    "engines.model_server",
    "engines.follow_up",
    "engines.demo",
    "engines.device",
    "gate.judges",
    "gate.policy",
    "gate.reporting",
)


def test_import_contracts_hold():
    lint = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_no_import_cycle_among_modules():
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    imports = networkx.DiGraph()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            imports.add_edge(module, imported)
    cycles = [sorted(c) for c in networkx.strongly_connected_components(imports) if len(c) > 1]
    assert not cycles, f"modules importing each other: {cycles}"


@pytest.mark.parametrize("package", PURE)
def test_pure_package_imports_without_django_or_celery(package):
    code = f"""
import importlib, pkgutil, sys
root = importlib.import_module({package!r})
for info in pkgutil.walk_packages(getattr(root, "__path__", []), prefix=root.__name__ + "."):
    importlib.import_module(info.name)
loaded = sorted({{m.split(".")[0] for m in sys.modules}} & {{"django", "celery", "kombu", "rest_framework"}})
assert not loaded, f"{package} loaded {{loaded}}"
"""
    env = {
        "PATH": "/usr/bin:/bin",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONPATH": str(ROOT),
    }
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
