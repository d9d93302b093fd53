"""The personal-data scrub rule (`engines.scrub`, scrub-v1), English and Chinese: what it replaces,
and the numbers and words of contract questions it keeps."""

import pytest

from engines.scrub import RULE, luhn_valid, scrub_text


@pytest.mark.parametrize(
    ("text", "scrubbed", "replaced"),
    [
        ("Send it to jane.doe+law@example.co.uk today", "Send it to [EMAIL] today", {"email": 1}),
        ("Call me on (555) 123-4567 or 555.123.4567", "Call me on [PHONE] or [PHONE]", {"phone": 2}),
        ("London office +44 20 7946 0958", "London office [PHONE]", {"phone": 1}),
        ("我的手机是13812345678，座机010-62345678", "我的手机是[PHONE]，座机[PHONE]", {"phone": 2}),
        ("+86 13912345678 请回电", "[PHONE] 请回电", {"phone": 1}),  # the country code too
        ("身份证号11010519491231002X的租户", "身份证号[ID]的租户", {"id_number": 1}),
        ("card 4111 1111 1111 1111 was charged", "card [CARD] was charged", {"card_number": 1}),
        ("账号 6222021234567890", "账号 [NUMBER]", {"long_number": 1}),  # not Luhn-valid: a long number
        ("policy number 123456789", "policy number [NUMBER]", {"long_number": 1}),
        ("Mr. John Smith signed it", "Mr. [NAME] signed it", {"name": 1}),
        ("Dear Alice, is clause 5 void?", "Dear [NAME], is clause 5 void?", {"name": 1}),
        ("Dr Wu and Ms O'Brien disagree", "Dr [NAME] and Ms [NAME] disagree", {"name": 2}),
        ("张伟律师说王先生违约了", "[NAME]律师说[NAME]先生违约了", {"name": 2}),
        ("请转告李小姐和欧阳女士", "请转告[NAME]小姐和欧阳女士", {"name": 1}),  # 欧阳: not on the list
    ],
)
def test_what_it_replaces(text, scrubbed, replaced):
    result = scrub_text(text)
    assert (result.text, result.replaced) == (scrubbed, replaced)
    assert result.changed


@pytest.mark.parametrize(
    "text",
    [
        "Pay 30,000 USD within 30 days under clause 12.3 of the 2024-05-01 agreement.",
        "第12.3条规定买方应在30日内支付100000元。",
        "Dear Sir, what does the termination clause mean?",
        "Hi team, is this a penalty clause?",
        "对方律师说关于高级律师费的条款无效，向律师咨询了",
        "What did the landlord say?",
        "Order 4111 1111 1111 1112 items",  # 16 digits that fail the Luhn check and have spaces: kept
    ],
)
def test_what_it_keeps(text):
    result = scrub_text(text)
    assert (result.text, result.replaced, result.changed) == (text, {}, False)


def test_the_rule_has_a_name_and_luhn_is_luhn():
    assert RULE == "scrub-v1"
    assert luhn_valid("4111111111111111") and luhn_valid("79927398713")
    assert not luhn_valid("4111111111111112") and not luhn_valid("79927398710")
