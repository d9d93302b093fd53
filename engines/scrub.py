"""Personal data scrubbed from a live question before it joins a suite. Pure: no Django.

One rule set, `RULE` (its name is stored with every item it scrubbed), applied in this order, each
match replaced by a placeholder (the salutation itself is kept, only the name after it goes):

1. `email`: `local@domain.tld` -> `[EMAIL]`.
2. `id_number`: a Chinese resident ID number, 17 digits and a digit or X -> `[ID]`.
3. `card_number`: 13 to 19 digits, single spaces or hyphens allowed between them, that pass the Luhn
   check (payment cards) -> `[CARD]`.
4. `phone`: a mainland mobile number (1[3-9] and 9 more digits, optionally after +86 / 86), a Chinese
   landline (0 and 2-3 digits, a hyphen, 7-8 digits), a North American number ((555) 123-4567,
   555-123-4567, +1 555 123 4567), or any `+` and 8-15 digits with single spaces, dots or hyphens
   -> `[PHONE]`.
5. `long_number`: any other run of 9 or more digits (account, passport, policy numbers) -> `[NUMBER]`.
6. `name`: in English, one or two capitalised words after Mr, Mrs, Ms, Miss, Mx, Dr, Prof (with or
   without a dot) or after Dear, Hi, Hello -> `[NAME]` ("Dr. Jane Smith" -> "Dr. [NAME]"); in Chinese,
   a common surname (about 90 of the 100 most frequent: `SURNAMES`) and up to two more characters
   before 先生, 女士, 小姐, 太太, 老师, 律师, 经理, 总监 or 医生 -> `[NAME]` ("张伟律师" ->
   "[NAME]律师"). "Dear Sir", "Hi team" and the like are kept.

Numbers that are not digits runs of these shapes (amounts such as 30,000, dates, clause numbers such
as 12.3, short ids) are kept: they are what contract questions are about. Names without a salutation
are not found (no name list, no tagger): the rule is meant to be read and predicted, not complete.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

RULE = "scrub-v1"

PLACEHOLDERS = {
    "email": "[EMAIL]",
    "id_number": "[ID]",
    "card_number": "[CARD]",
    "phone": "[PHONE]",
    "long_number": "[NUMBER]",
    "name": "[NAME]",
}

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_ID = re.compile(r"(?<![0-9A-Za-z])\d{17}[\dXx](?![0-9A-Za-z])")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_PHONE = re.compile(
    "|".join(
        (
            r"(?<![\d+])(?:\+?86[ -]?)?1[3-9]\d{9}(?!\d)",  # mainland mobile
            r"(?<!\d)0\d{2,3}-\d{7,8}(?!\d)",  # Chinese landline
            r"(?<![\d+])(?:\+?1[ .-]?)?(?:\(\d{3}\)\s?|\d{3}[ .-])\d{3}[ .-]\d{4}(?!\d)",  # North American
            r"\+\d(?:[ .-]?\d){7,14}(?!\d)",  # international
        )
    )
)
_LONG_NUMBER = re.compile(r"(?<!\d)\d{9,}(?!\d)")
_EN_NAME = re.compile(
    r"\b(?P<salutation>(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof)\.?|Dear|Hi|Hello)\s+"
    r"(?!(?:Sir|Madam|All|Team|There)\b)(?P<name>[A-Z][A-Za-z'-]+(?:\s+[A-Z][A-Za-z'-]+)?)"
)
# The most frequent surnames, less those that are also common words before a title (方 in 对方律师, 向
# in 向律师咨询, 于 in 关于, 史 in 历史老师, 高 in 高级律师, 程 in 工程经理, 金 in 基金经理, 付 in 支付).
SURNAMES = (
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘蒋蔡余杜叶苏魏吕丁任沈姚卢"
    "姜崔钟谭陆汪范石廖贾夏韦白邹孟熊秦邱江尹薛闫段雷侯龙陶黎贺顾毛郝龚邵万钱严覃武戴莫孔汤"
)
_ZH_NAME = re.compile(rf"[{SURNAMES}][\u4e00-\u9fff]{{0,2}}?(?=先生|女士|小姐|太太|老师|律师|经理|总监|医生)")


@dataclass(frozen=True, kw_only=True)
class Scrubbed:
    """The text with personal data replaced, and how many of each kind were replaced."""

    text: str
    replaced: dict[str, int] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(self.replaced)


def luhn_valid(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def scrub_text(text: str) -> Scrubbed:
    """`text` with the personal data of `RULE` replaced (see the module's docstring)."""
    counts: Counter[str] = Counter()

    def replace(kind: str) -> Callable[[re.Match[str]], str]:
        def sub(match: re.Match[str]) -> str:
            counts[kind] += 1
            return PLACEHOLDERS[kind]

        return sub

    def card(match: re.Match[str]) -> str:
        if not luhn_valid(re.sub(r"[ -]", "", match.group(0))):
            return match.group(0)
        counts["card_number"] += 1
        return PLACEHOLDERS["card_number"]

    def en_name(match: re.Match[str]) -> str:
        counts["name"] += 1
        return f"{match.group('salutation')} {PLACEHOLDERS['name']}"

    text = _EMAIL.sub(replace("email"), text)
    text = _ID.sub(replace("id_number"), text)
    text = _CARD.sub(card, text)
    text = _PHONE.sub(replace("phone"), text)
    text = _LONG_NUMBER.sub(replace("long_number"), text)
    text = _EN_NAME.sub(en_name, text)
    text = _ZH_NAME.sub(replace("name"), text)
    return Scrubbed(text=text, replaced=dict(sorted(counts.items())))
