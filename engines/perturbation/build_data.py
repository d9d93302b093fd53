"""Builds the perturbation engine's data files from installed packages, offline.

    .venv/bin/python -m engines.perturbation.build_data

Writes, under `engines/perturbation/data/`:

- `nltk_data/corpora/stopwords/english`: the English stopword list `import textattack` looks up
  (NLTK's own list is a download). The union of TextFooler's stopword list (in textattack's
  `textfooler_jin_2019.py`), scikit-learn's `ENGLISH_STOP_WORDS` and the four auxiliaries of
  NLTK's list that neither has.
- `homoglyphs.tsv`: letter → look-alike character, the table inside textattack's
  `WordSwapHomoglyphSwap` (letters only; its Unicode "intentional" table is missing from the wheel).
- `chinese_homophones.tsv`: common character → common characters with the same toned reading, most
  frequent first. Readings from the `pinyin` package (Unihan kMandarin, first reading); character
  frequency summed over jieba's dictionary (`jieba/dict.txt`, word counts).

textattack is parsed, not imported: importing it needs the stopword file this script writes.
Output is deterministic (sorted), so a rebuild on the same packages gives the same bytes.
"""

from __future__ import annotations

import ast
import importlib.util
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent / "data"
STOPWORDS_PATH = DATA_DIR / "nltk_data" / "corpora" / "stopwords" / "english"
HOMOGLYPHS_PATH = DATA_DIR / "homoglyphs.tsv"
HOMOPHONES_PATH = DATA_DIR / "chinese_homophones.tsv"

COMMON_CHARS = 3500  # the size of the official list of common characters (常用字)
HOMOPHONES_PER_CHAR = 6
# In NLTK's English list but in neither installed list (its other missing entries, "m" and "ma",
# are contraction fragments the engine never edits: too short).
NLTK_AUXILIARIES = ("did", "does", "doing", "having")


def _package_dir(*, name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"package {name!r} is not installed")
    return Path(spec.origin).parent


def _literal_assigned(*, path: Path, target: str) -> Any:
    """The literal value assigned to `target` (a name or `self.<attr>`) in a Python source file, of
    whatever type the file gives it."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Assign):
            continue
        for name in node.targets:
            if ast.unparse(name) == target:
                value = node.value
                # `set([...])` is a call, not a literal: take its argument.
                if isinstance(value, ast.Call) and ast.unparse(value.func) == "set":
                    value = value.args[0]
                return ast.literal_eval(value)
    raise RuntimeError(f"no literal assignment to {target} in {path}")


def stopwords_build() -> list[str]:
    textattack_dir = _package_dir(name="textattack")
    textfooler = _literal_assigned(
        path=textattack_dir / "attack_recipes" / "textfooler_jin_2019.py", target="stopwords"
    )
    from sklearn.feature_extraction._stop_words import ENGLISH_STOP_WORDS

    return sorted(set(textfooler) | set(ENGLISH_STOP_WORDS) | set(NLTK_AUXILIARIES))


def homoglyphs_build() -> dict[str, str]:
    textattack_dir = _package_dir(name="textattack")
    homos = _literal_assigned(
        path=textattack_dir / "transformations" / "word_swaps" / "word_swap_homoglyph_swap.py",
        target="self.homos",
    )
    # Digits and punctuation stay out: a look-alike digit is a number change.
    return {k: v for k, v in sorted(homos.items()) if k.isalpha()}


def _char_frequencies() -> Counter[str]:
    counts: Counter[str] = Counter()
    with open(_package_dir(name="jieba") / "dict.txt", encoding="utf-8") as f:
        for line in f:
            word, freq = line.split(" ")[:2]
            for char in word:
                if "\u4e00" <= char <= "\u9fff":
                    counts[char] += int(freq)
    return counts


def _first_readings() -> dict[str, str]:
    readings = {}
    with open(_package_dir(name="pinyin") / "Mandarin.dat", encoding="utf-8") as f:
        for line in f:
            code, values = line.rstrip("\n").split("\t")
            readings[chr(int(code, 16))] = values.split(" ")[0].lower()
    return readings


def homophones_build() -> dict[str, list[str]]:
    frequencies = _char_frequencies()
    readings = _first_readings()
    # Most frequent first, ties by code point, so the order is stable.
    common = sorted((c for c in frequencies if c in readings), key=lambda c: (-frequencies[c], c))
    common = common[:COMMON_CHARS]
    by_reading: dict[str, list[str]] = defaultdict(list)
    for char in common:
        by_reading[readings[char]].append(char)
    table = {}
    for char in sorted(common):
        others = [c for c in by_reading[readings[char]] if c != char][:HOMOPHONES_PER_CHAR]
        if others:
            table[char] = others
    return table


def data_build() -> None:
    STOPWORDS_PATH.parent.mkdir(parents=True, exist_ok=True)
    STOPWORDS_PATH.write_text("".join(f"{w}\n" for w in stopwords_build()), encoding="utf-8")
    HOMOGLYPHS_PATH.write_text(
        "".join(f"{k}\t{v}\n" for k, v in homoglyphs_build().items()), encoding="utf-8"
    )
    HOMOPHONES_PATH.write_text(
        "".join(f"{k}\t{''.join(v)}\n" for k, v in homophones_build().items()), encoding="utf-8"
    )


if __name__ == "__main__":
    data_build()
    for path in (STOPWORDS_PATH, HOMOGLYPHS_PATH, HOMOPHONES_PATH):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        print(f"{path.relative_to(DATA_DIR.parent.parent.parent)}: {lines} lines")
