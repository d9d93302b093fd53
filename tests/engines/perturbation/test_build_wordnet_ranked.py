"""The ranked WordNet synonyms `textfooler-v3` swaps English words for (`data/wordnet_ranked.tsv`,
built by `engines.perturbation.build_wordnet_ranked` from Debian's WordNet and its sense counts)."""

from pathlib import Path

import pytest

from engines.perturbation.build_wordnet_ranked import ANTONYMS_PATH, OUTPUT_PATH

WORDNET = Path("/usr/share/wordnet")


def shipped() -> dict[str, tuple[str, list[str]]]:
    rows = (line.split("\t") for line in OUTPUT_PATH.read_text(encoding="utf-8").splitlines())
    return {word: (pos, synonyms.split()) for word, pos, synonyms in rows}


def test_dominant_senses_keep_the_legal_meanings_and_drop_the_rare_ones():
    table = shipped()
    assert table["liability"] == ("n", ["indebtedness"])  # its second sense, untagged: kept
    assert table["law"] == ("n", ["jurisprudence"])  # not `police` (1 tag of 96)
    assert table["confidential"] == ("a", ["secret"])
    pos, synonyms = table["terminated"]  # inflected as the word is
    assert pos == "v" and synonyms[:2] == ["ended", "finished"]
    assert "days" not in table or "years" not in table["days"][1]  # `days` is a form of `day`


def test_no_antonym_no_self_and_plain_words_only():
    antonyms = set()
    for line in ANTONYMS_PATH.read_text().splitlines():
        a, b = line.split("\t")
        antonyms |= {(a, b), (b, a)}
    for word, (pos, synonyms) in shipped().items():
        assert pos in "nvar" and synonyms and word not in synonyms
        assert all(s.isalpha() and s.islower() for s in synonyms)
        assert not any((word, s) in antonyms for s in synonyms), word


@pytest.mark.skipif(not (WORDNET / "index.sense").exists(), reason="needs Debian's wordnet-sense-index")
def test_the_shipped_table_is_what_the_build_gives():
    from engines.perturbation.build_counterfit import glove_load, wordnet_reader
    from engines.perturbation.build_wordnet_ranked import VOCABULARY, word_synonyms_ranked

    words, _ = glove_load(size=VOCABULARY)
    vocabulary = set(words)
    antonyms = set()
    for line in ANTONYMS_PATH.read_text().splitlines():
        a, b = line.split("\t")
        antonyms |= {(a, b), (b, a)}
    table = shipped()
    with wordnet_reader(WORDNET) as reader:
        for word in sorted(vocabulary)[::97]:
            built = word_synonyms_ranked(reader=reader, word=word, vocabulary=vocabulary, antonyms=antonyms)
            expected = (built[0], built[1]) if built and built[1] else None
            assert table.get(word) == expected, word
