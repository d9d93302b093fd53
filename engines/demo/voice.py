"""How the demo's simulated users write (SYNTHETIC): `plain` sends a suite item's text as it is;
`casual` writes it as people type into a chat box — the clause pasted inside a colloquial request,
English often lower-cased with a slipped letter here and there, Chinese requests now and then with an
English word in them. The seed's §5.1 case: a suite cleaner than the traffic it is meant to predict.
None of the requests names a clause type, so the answer still depends on the clause alone."""

from __future__ import annotations

import random

VOICES = ("plain", "casual")
_REQUESTS = {
    "en": (
        "hey can u tell me what kind of clause this is: {text}",
        "{text} -- what type of clause is that?",
        "quick q, whats this clause about?? {text}",
        "pls classify this one for me: {text}",
        "my client sent this, what is it: {text}",
        "{text} (found this in the draft, what clause type?)",
    ),
    "zh": (
        "帮我看下这是啥条款：{text}",
        "{text} 这条属于哪类啊？",
        "请问这个条款是什么类型的 {text}",
        "麻烦看一下这个clause：{text}",
        "{text}（客户发来的，这是什么条款？）",
        "急！这条是什么意思 {text}",
    ),
}
TYPO_RATE = 0.05  # of English words of four letters or more
LOWER_RATE = 0.5


def _slip(word: str, rng: random.Random) -> str:
    """One slip of the fingers: two neighbouring letters swapped, or one dropped."""
    at = rng.randrange(1, len(word) - 1)
    if rng.random() < 0.5:
        return word[:at] + word[at + 1] + word[at] + word[at + 2 :]
    return word[:at] + word[at + 1 :]


def voice_apply(*, text: str, language: str, voice: str, rng: random.Random) -> str:
    """`text` as a user of `voice` asks it (`language`: en, zh or mixed; mixed asks in the clause's
    first script's language)."""
    if voice == "plain":
        return text
    if voice != "casual":
        raise ValueError(f"voice must be one of {VOICES}, not {voice!r}")
    asks_in = "zh" if language == "zh" else "en"
    if asks_in == "en":
        words = [
            _slip(w, rng) if len(w) >= 4 and w.isalpha() and rng.random() < TYPO_RATE else w
            for w in text.split(" ")
        ]
        text = " ".join(words)
        if rng.random() < LOWER_RATE:
            text = text.lower()
    return rng.choice(_REQUESTS[asks_in]).format(text=text)
