"""Builds the ranked WordNet synonyms of recipe `textfooler-v3`, offline.

    .venv/bin/python -m engines.perturbation.build_wordnet_ranked [--wordnet /usr/share/wordnet]

For each word of the vocabulary (the `VOCABULARY` most frequent lowercase words of GloVe 6B, as
`build_counterfit` reads them) that WordNet 3.0 knows as a lemma in its own right (an inflection of
another, `days` of `day` whatever WordNet's sense of `days`, takes its base's synonyms inflected
alike by regular endings: `terminated` → `ended`, `finished`; irregular forms get none):
- its part of speech is that of its dominant senses: the one whose senses hold the most SemCor tags
  (Debian's `wordnet-sense-index`, `cntlist.rev`), ties going to the part of speech of its first
  sense; satellite adjectives count as adjectives. No offline tagger ships, so the word's part of
  speech in a given sentence is not known: the dominant one stands for it;
- its kept senses in that part of speech are its first `FIRST_SENSES` (WordNet orders senses by
  frequency) and any other holding at least `SENSE_SHARE` of the word's tags there: `law`'s seventh
  sense (`police`, 1 tag of 96) is not kept, `liability`'s second (`indebtedness`, untagged) is;
- its synonyms are the other single-word lemmas of the kept senses, in the vocabulary, most frequent
  sense first and, within a sense, the lemma with more tags first; never one of the word's antonyms
  (WordNet's antonym links widened to both synsets, as `data/wordnet_antonyms.tsv` has them).

Writes `data/wordnet_ranked.tsv`: `word<TAB>pos<TAB>synonym synonym ...`, sorted by word, so a
rebuild on the same packages gives the same bytes. Only the build needs WordNet: its output ships.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from engines.perturbation.build_counterfit import glove_load, wordnet_reader

DATA_DIR = Path(__file__).resolve().parent / "data"
OUTPUT_PATH = DATA_DIR / "wordnet_ranked.tsv"
ANTONYMS_PATH = DATA_DIR / "wordnet_antonyms.tsv"
VOCABULARY = 50_000
FIRST_SENSES = 2
SENSE_SHARE = 0.05


def _pos(synset: Any) -> str:
    return "a" if synset.pos() == "s" else synset.pos()


def _inflected(
    *, reader: Any, base: str, word: str, synonym: str, pos: str, vocabulary: set[str]
) -> str | None:
    """`synonym` inflected as `word` inflects `base` (a regular plural or third person, past or
    gerund), if the vocabulary has that form and WordNet reads it back as `synonym`: `terminated` of
    `terminate` makes `ended` of `end`."""
    if word.endswith("ing"):
        forms = [synonym[:-1] + "ing", synonym + "ing", synonym + synonym[-1] + "ing"]
    elif word.endswith("d"):
        forms = [synonym + "d", synonym + "ed", synonym + synonym[-1] + "ed", synonym[:-1] + "ied"]
    elif word.endswith("s"):
        forms = [synonym + "s", synonym + "es", synonym[:-1] + "ies"]
    else:
        return None  # irregular (`paid`, `written`, `children`): no rule to copy
    for form in forms:
        if form != synonym and form in vocabulary and synonym in reader._morphy(form, pos):
            return form
    return None


def word_synonyms_ranked(
    *, reader: Any, word: str, vocabulary: set[str], antonyms: set[tuple[str, str]]
) -> tuple[str, list[str]] | None:
    """(part of speech, ranked synonyms) of `word`, or None when WordNet has no sense of it. An
    inflected word (`damages`, `terminated`) takes its base's synonyms in the base's part of speech,
    inflected alike (those that cannot be are left out)."""
    bases = {form for pos in "nvar" for form in reader._morphy(word, pos)} - {word}
    if bases:
        for base in sorted(bases):
            found = word_synonyms_ranked(reader=reader, word=base, vocabulary=vocabulary, antonyms=antonyms)
            if found is None or base not in reader._morphy(word, found[0]):
                continue
            pos, synonyms = found
            forms = [
                _inflected(reader=reader, base=base, word=word, synonym=s, pos=pos, vocabulary=vocabulary)
                for s in synonyms
            ]
            return pos, list(dict.fromkeys(f for f in forms if f and f != word and (word, f) not in antonyms))
        return None
    lemmas = [lemma for lemma in reader.lemmas(word) if lemma.name().lower() == word]
    if not lemmas:
        return None
    by_pos: dict[str, list[Any]] = {}
    for lemma in lemmas:  # in sense order
        by_pos.setdefault(_pos(lemma.synset()), []).append(lemma)
    tags = {pos: sum(lemma.count() for lemma in senses) for pos, senses in by_pos.items()}
    first = _pos(reader.synsets(word)[0])
    pos = max(by_pos, key=lambda p: (tags[p], p == first))
    ranked: list[str] = []
    for rank, lemma in enumerate(by_pos[pos]):
        if rank >= FIRST_SENSES and not (tags[pos] and lemma.count() / tags[pos] >= SENSE_SHARE):
            continue
        others = sorted(
            (o for o in lemma.synset().lemmas() if o.name() != word),
            key=lambda o: -o.count(),
        )
        for other in others:
            name = other.name()
            if name in vocabulary and name not in ranked and (word, name) not in antonyms:
                ranked.append(name)
    return pos, ranked


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--wordnet", type=Path, default=Path("/usr/share/wordnet"))
    parser.add_argument("--vocabulary", type=int, default=VOCABULARY)
    args = parser.parse_args()
    words, _ = glove_load(size=args.vocabulary)
    vocabulary = set(words)
    antonyms: set[tuple[str, str]] = set()
    for line in ANTONYMS_PATH.read_text().splitlines():
        a, b = line.split("\t")
        antonyms.update({(a, b), (b, a)})
    lines = []
    with wordnet_reader(args.wordnet) as reader:
        for word in sorted(vocabulary):
            found = word_synonyms_ranked(reader=reader, word=word, vocabulary=vocabulary, antonyms=antonyms)
            if found and found[1]:
                lines.append(f"{word}\t{found[0]}\t{' '.join(found[1])}\n")
    OUTPUT_PATH.write_text("".join(lines))
    print(f"wrote {OUTPUT_PATH} ({len(lines)} words)")


if __name__ == "__main__":
    main()
