"""Sentence embeddings from the bundled MiniLM (engines.embeddings), on CPU."""

import numpy as np

from engines.embeddings import DIMENSIONS, sentence_embed

TEXTS = [
    "What if the buyer pays the invoice late?",
    "What happens when the purchaser pays after the due date?",
    "The weather in Lisbon is sunny this weekend.",
    "那如果不可抗力呢？",
]


def test_shape_dtype_and_unit_rows():
    vectors = sentence_embed(TEXTS, device="cpu")
    assert vectors.shape == (len(TEXTS), DIMENSIONS) == (4, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_empty_input():
    vectors = sentence_embed([], device="cpu")
    assert vectors.shape == (0, 384) and vectors.dtype == np.float32


def test_paraphrase_is_closer_than_an_unrelated_sentence():
    question, paraphrase, unrelated, _ = sentence_embed(TEXTS, device="cpu")
    assert question @ paraphrase > 0.6
    assert question @ unrelated < 0.2
    assert question @ paraphrase > question @ unrelated + 0.4


def test_batches_and_padding_do_not_change_the_vectors():
    whole = sentence_embed(TEXTS, device="cpu")
    one_by_one = sentence_embed(TEXTS, batch_size=1, device="cpu")
    np.testing.assert_allclose(whole, one_by_one, atol=1e-5)


def test_long_text_is_truncated_not_rejected():
    (vector,) = sentence_embed(["payment " * 1000], device="cpu")
    assert abs(np.linalg.norm(vector) - 1.0) < 1e-5


def test_rows_follow_the_callers_order_whatever_the_lengths():
    texts = ["A much longer sentence about the termination notice period of this lease.", "Hi", "Why?"]
    forward = sentence_embed(texts, batch_size=2)
    backward = sentence_embed(texts[::-1], batch_size=2)
    np.testing.assert_allclose(forward, backward[::-1], atol=1e-5)
    np.testing.assert_allclose(forward[1], sentence_embed(["Hi"])[0], atol=1e-5)
