"""The bundled demo family "contract-assistant": a SYNTHETIC clause-type classification task.

Everything here is generated from hand-written templates; no real contracts are involved. Each
item is one contract clause (English or Chinese) labelled with its clause type, plus the short
text answer a model should give (a one-sentence explanation of that clause type).

Train and eval use disjoint templates, party names, currencies, numbers and jurisdictions, so
the eval set is paraphrase, not copy. Train holds clean clauses only; eval adds four hard kinds
the models never see in training:

- `long_contract`: the clause buried in 300-600 words (450-900 Chinese characters) of unrelated
  boilerplate sections (notices, delivery, assignment...), none of which is itself a clause type.
- `mixed_language`: an English clause inside a Chinese contract or the reverse (language "mixed").
- `ocr_noise`: character-level scan errors (rn/m, l/1, O/0, look-alike Chinese characters,
  dropped spaces, words broken in two).
- `clause_conflict`: a clause that mentions a second clause type. The label is always the type
  whose obligation the sentence creates; the other type only appears as a trigger, a reference
  or an exception (e.g. "late payment incurs liquidated damages" is liquidated_damages).

Pure Python and deterministic: the same seed gives identical output.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass

CLAUSE_TYPES = (
    "payment",
    "termination",
    "liability",
    "confidentiality",
    "force_majeure",
    "governing_law",
    "liquidated_damages",
    "deposit",
)

ANSWERS: dict[str, dict[str, str]] = {
    "payment": {
        "en": "A payment clause sets how much is paid, when it is due and how it is paid.",
        "zh": "付款条款规定应付金额、付款期限和付款方式。",
    },
    "termination": {
        "en": "A termination clause sets when and how a party may end the contract early.",
        "zh": "解除条款规定一方在何种情形下、以何种方式可以提前终止合同。",
    },
    "liability": {
        "en": "A liability clause allocates responsibility for losses and often caps it.",
        "zh": "责任条款分配损失的承担，通常对赔偿责任设定上限或予以排除。",
    },
    "confidentiality": {
        "en": "A confidentiality clause obliges the parties to keep shared information secret.",
        "zh": "保密条款要求各方对在合作中获得的信息予以保密。",
    },
    "force_majeure": {
        "en": "A force majeure clause excuses non-performance caused by events beyond a party's control.",
        "zh": "不可抗力条款免除因一方无法控制的事件导致不能履行的责任。",
    },
    "governing_law": {
        "en": "A governing law clause names the law that governs the contract and its disputes.",
        "zh": "适用法律条款指定合同及其争议所适用的法律。",
    },
    "liquidated_damages": {
        "en": "A liquidated damages clause fixes in advance the sum payable for a breach.",
        "zh": "违约金条款预先约定一方违约时应当支付的金额。",
    },
    "deposit": {
        "en": "A deposit clause sets an earnest sum (dingjin) that the payer forfeits if it "
        "defaults and the recipient returns double if it defaults.",
        "zh": "定金条款约定给付定金的一方违约无权收回定金，收受定金的一方违约应双倍返还。",
    },
}

HARD_TAGS = ("long_contract", "mixed_language", "ocr_noise", "clause_conflict")

TRAIN_PER_CELL = 60  # per (label, language): 8 labels x 2 languages x 60 = 960 items
EVAL_PER_CELL = 20  # 320 eval items
EVAL_PLAIN_PER_CELL = 7  # 35 % plain; the other 13 rotate over the four hard tags


@dataclass(frozen=True)
class DemoItem:
    id: str
    input: str
    label: str
    reference: str
    language: str  # "en", "zh" or "mixed"
    tags: tuple[str, ...]


@dataclass(frozen=True)
class DemoDataset:
    train: tuple[DemoItem, ...]
    eval: tuple[DemoItem, ...]


# Templates. Slots: {a} {b} parties, {amt}, {days}, {years}, {months}, {pct}, {pct2}, {law},
# {city}, {agr} (what the contract calls itself). Train and eval differ in both sentences and
# slot values.
_TRAIN_TEMPLATES: dict[str, dict[str, tuple[str, ...]]] = {
    "payment": {
        "en": (
            ("{b} shall pay {a} the fee of {amt} within {days} days after receipt of a valid invoice."),
            (
                "All invoices issued by {a} are payable by {b} by bank transfer within {days} days "
                "of the invoice date."
            ),
            (
                "The purchase price of {amt} shall be paid by {b} in two instalments, the first "
                "upon signing and the second upon delivery."
            ),
            (
                "{b} will pay the monthly service charge of {amt} in advance on the first business "
                "day of each month."
            ),
            "Payment of {amt} shall be made to the bank account designated by {a} in writing.",
            ("{a} shall invoice {b} monthly and {b} shall settle each invoice in full within {days} days."),
            "The total contract price is {amt}, payable by {b} against delivery of the goods.",
            ("Fees of {amt} are exclusive of VAT, which {b} shall pay in addition at the applicable rate."),
        ),
        "zh": (
            "{b}应在收到{a}开具的合法发票后{days}日内向{a}支付服务费{amt}。",
            "合同总价款为{amt}，{b}应于货物验收合格后{days}日内一次性付清。",
            "{b}应按月向{a}支付服务费用，每月费用为{amt}，于每月{days}日前支付。",
            "本{agr}价款{amt}分两期支付：{b}在签约时支付一半，交货后支付其余款项。",
            "{b}应将全部款项{amt}以银行转账方式支付至{a}指定的账户。",
            "{a}每月向{b}开具发票，{b}应在{days}日内结清全部款项。",
            "上述价款{amt}不含增值税，税款由{b}另行承担并支付。",
        ),
    },
    "termination": {
        "en": (
            (
                "Either party may terminate this {agr} by giving {days} days' written notice to "
                "the other party."
            ),
            (
                "{a} may terminate this {agr} with immediate effect if {b} commits a material "
                "breach and fails to remedy it within {days} days."
            ),
            (
                "This {agr} shall terminate automatically {days} days after {b} becomes insolvent "
                "or enters into liquidation."
            ),
            ("Upon termination of this {agr}, {b} shall return to {a} all equipment supplied by {a}."),
            (
                "{b} may terminate this {agr} for convenience at any time on {days} days' prior "
                "written notice to {a}."
            ),
            "This {agr} may be terminated at any time by mutual written agreement of {a} and {b}.",
            (
                "The term of this {agr} is {years} years, and either party may terminate it at the "
                "end of the term by notice."
            ),
        ),
        "zh": (
            "任何一方可提前{days}日书面通知对方解除本{agr}。",
            "{b}严重违约且在{days}日内未予纠正的，{a}有权立即解除本{agr}。",
            "{b}破产或进入清算程序的，本{agr}自{days}日后自动终止。",
            "合同解除后，{b}应将{a}提供的全部设备归还{a}。",
            "{b}可以随时提前{days}日书面通知{a}终止本{agr}。",
            "经{a}与{b}协商一致，可以书面形式解除本{agr}。",
            "本{agr}有效期为{years}年，期满任何一方可通知对方终止合同。",
        ),
    },
    "liability": {
        "en": (
            (
                "The total liability of {a} under this {agr} shall not exceed the fees paid by {b} "
                "in the preceding {months} months."
            ),
            (
                "Neither {a} nor {b} shall be liable for any indirect, incidental or consequential "
                "loss, including loss of profits."
            ),
            (
                "{a} shall be liable for damage to the property of {b} caused by the negligence of "
                "its employees."
            ),
            (
                "Nothing in this {agr} limits the liability of {a} for death or personal injury "
                "caused by negligence or for fraud."
            ),
            (
                "{b} shall indemnify {a} against all claims, losses and expenses arising from a "
                "breach of this {agr} by {b}."
            ),
            "The aggregate liability of each party for all claims is capped at {amt}.",
            ("{a} accepts no responsibility for losses resulting from misuse of the products by {b}."),
        ),
        "zh": (
            "{a}在本{agr}项下的全部赔偿责任不超过{b}在此前{months}个月内已支付的费用。",
            "{a}和{b}均不对间接损失、附带损失或利润损失承担责任。",
            "因{a}员工的过失造成{b}财产损坏的，由{a}承担赔偿责任。",
            "本{agr}的任何内容均不限制{a}因过失造成人身伤亡或因欺诈而应承担的责任。",
            "因{b}违反本{agr}而引起的一切索赔、损失和费用，由{b}负责赔偿，使{a}免受损害。",
            "各方就所有索赔承担的责任总额以{amt}为限。",
            "因{b}不当使用产品造成的损失，{a}不承担任何责任。",
        ),
    },
    "confidentiality": {
        "en": (
            (
                "{b} shall keep confidential all information disclosed by {a} and shall not "
                "disclose it to any third party."
            ),
            ("{b} shall use the confidential information of {a} solely for the purposes of this {agr}."),
            (
                "The obligations of confidentiality of {b} shall continue for {years} years after "
                "the expiry of this {agr}."
            ),
            (
                "Confidential information does not include information that is or becomes publicly "
                "available other than through a breach of this {agr} by {b}."
            ),
            (
                "{a} may disclose confidential information to its employees who need to know it, "
                "provided they are bound by equivalent obligations of secrecy."
            ),
            (
                "Neither {a} nor {b} shall disclose the terms of this {agr} without the prior "
                "written consent of the other."
            ),
            (
                "All technical data, pricing and customer lists received from {a} shall be treated "
                "by {b} as confidential."
            ),
        ),
        "zh": (
            "{b}应对{a}披露的所有信息予以保密，不得向任何第三方披露。",
            "{b}仅可为履行本{agr}之目的使用{a}的保密信息。",
            "{b}的保密义务在本{agr}期满后{years}年内继续有效。",
            "保密信息不包括非因{b}违反本{agr}而已经或成为公开的信息。",
            "{a}可以向确有知悉必要的员工披露保密信息，但该等员工应承担同等的保密义务。",
            "未经对方事先书面同意，{a}和{b}均不得披露本{agr}的条款。",
            "从{a}处获得的技术资料、价格信息及客户名单，{b}均应作为商业秘密予以保密。",
        ),
    },
    "force_majeure": {
        "en": (
            (
                "Neither {a} nor {b} shall be liable for any delay or failure to perform caused by "
                "force majeure, including fire, flood, earthquake, war or epidemic."
            ),
            (
                "If {a} is affected by a force majeure event, it shall notify {b} within {days} "
                "days and provide evidence of the event."
            ),
            (
                "If a force majeure event continues for more than {days} days, either party may "
                "terminate this {agr}."
            ),
            (
                "Force majeure means any event beyond the reasonable control of {a} or {b}, such "
                "as natural disasters, strikes or government action."
            ),
            (
                "The performance of the obligations of {b} under this {agr} shall be suspended "
                "while the force majeure event continues."
            ),
            (
                "{a} shall not be in breach of this {agr} if its performance is prevented by acts "
                "of God, riots or governmental orders."
            ),
        ),
        "zh": (
            "因火灾、洪水、地震、战争或疫情等不可抗力导致延迟或不能履行的，{a}和{b}均不承担责任。",
            "{a}受不可抗力影响的，应在{days}日内通知{b}并提供相关证明。",
            "不可抗力事件持续超过{days}日的，任何一方均可解除本{agr}。",
            "不可抗力是指{a}或{b}无法合理控制的事件，如自然灾害、罢工或政府行为。",
            "在不可抗力事件持续期间，{b}在本{agr}项下义务的履行予以中止。",
            "{a}履行本{agr}因天灾、暴乱或政府命令而受阻的，不视为违约。",
        ),
    },
    "governing_law": {
        "en": (
            "This {agr} shall be governed by and construed in accordance with the laws of {law}.",
            (
                "Any dispute arising out of this {agr} shall be submitted to the courts of {city}, "
                "and the laws of {law} shall apply."
            ),
            ("The validity, interpretation and performance of this {agr} are governed by the laws of {law}."),
            (
                "This {agr} and any non-contractual obligations arising from it are subject to the "
                "law of {law}."
            ),
            (
                "{a} and {b} agree that the laws of {law}, excluding its conflict of laws rules, "
                "govern this {agr}."
            ),
            (
                "Disputes between {a} and {b} shall be finally resolved by arbitration in {city} "
                "under the laws of {law}."
            ),
        ),
        "zh": (
            "本{agr}的订立、效力、解释和履行均适用{law}法律。",
            "因本{agr}引起的任何争议，应提交{city}有管辖权的人民法院，并适用{law}法律。",
            "本{agr}受{law}法律管辖并依其解释。",
            "{a}和{b}同意，本{agr}适用{law}法律，但不包括其冲突法规则。",
            "{a}与{b}之间的争议应依照{law}法律在{city}通过仲裁最终解决。",
            "本{agr}及由此产生的非合同义务均受{law}法律管辖。",
        ),
    },
    "liquidated_damages": {
        "en": (
            (
                "If {a} fails to deliver on time, {a} shall pay {b} liquidated damages of {pct}% "
                "of the contract price for each day of delay."
            ),
            "The party in breach shall pay the other party liquidated damages of {amt}.",
            (
                "Liquidated damages payable by {a} for late completion shall not exceed {pct2}% of "
                "the total contract price."
            ),
            (
                "{a} and {b} agree that the liquidated damages are a genuine pre-estimate of loss "
                "and not a penalty."
            ),
            ("If {b} cancels the order without cause, {b} shall pay {a} liquidated damages of {amt}."),
            "For each week of delay, {a} shall pay a fixed sum of {amt} as liquidated damages.",
        ),
        "zh": (
            "{a}未按期交货的，每延迟一日应按合同价款的{pct}%向{b}支付违约金。",
            "违约方应向守约方支付违约金{amt}。",
            "{a}逾期完工的违约金总额不超过合同总价的{pct2}%。",
            "{a}和{b}确认，违约金系对损失的合理预估，而非惩罚。",
            "{b}无故取消订单的，应向{a}支付违约金{amt}。",
            "每逾期一周，{a}应支付固定金额{amt}作为违约金。",
        ),
    },
    "deposit": {
        "en": (
            "Within {days} days after signing, {b} shall pay {a} a deposit of {amt}.",
            (
                "If {b}, having paid the deposit, fails to perform, it may not reclaim the "
                "deposit; if {a}, having received the deposit, fails to perform, it shall return "
                "twice the deposit."
            ),
            "The deposit of {amt} shall be applied towards the purchase price upon completion.",
            "{b} shall pay an earnest money deposit of {amt} to secure performance of this {agr}.",
            "The deposit paid by {b} may not exceed {pct2}% of the contract price.",
            (
                "{a} shall refund the deposit to {b} in full if the sale does not proceed for "
                "reasons not attributable to {b}."
            ),
        ),
        "zh": (
            "{b}应在本{agr}签订后{days}日内向{a}支付定金{amt}。",
            ("给付定金的{b}不履行债务的，无权要求返还定金；收受定金的{a}不履行债务的，应当双倍返还定金。"),
            "合同履行完毕后，{b}支付的定金{amt}应当抵作价款。",
            "{b}应交付定金{amt}，作为本{agr}履行的担保。",
            "{b}交付的定金数额不得超过合同标的额的{pct2}%。",
            "因非{b}原因导致交易未能完成的，{a}应全额退还定金。",
        ),
    },
}

_EVAL_TEMPLATES: dict[str, dict[str, tuple[str, ...]]] = {
    "payment": {
        "en": (
            ("{b} agrees to remit {amt} to {a} no later than {days} days from the date of each statement."),
            (
                "The consideration for the services, being {amt}, falls due in full {days} days "
                "after completion."
            ),
            (
                "Amounts owed by {b} under this contract are to be settled by wire transfer to the "
                "account nominated by {a}."
            ),
            ("{b} must settle the annual licence charge of {amt} in a single sum at the start of each year."),
            "Each invoice raised by {a} is due and payable within {days} days of its issue.",
        ),
        "zh": (
            "{b}须于每期结算单出具之日起{days}天内将{amt}汇入{a}的收款账户。",
            "服务报酬共计{amt}，由{b}在项目完工后{days}天内全额结清。",
            "{b}在本合同项下的应付费用以电汇方式付至{a}指定的银行账户。",
            "{b}应在每年年初一次性缴纳年度许可使用费{amt}。",
            "{a}出具的每张账单，{b}应自开具之日起{days}天内付讫。",
        ),
    },
    "termination": {
        "en": (
            (
                "{a} and {b} each have the right to cancel this contract upon {days} days' advance "
                "notice in writing."
            ),
            (
                "Should {b} materially default and not cure the default within {days} days, {a} "
                "may bring this contract to an end forthwith."
            ),
            "{a} is entitled to rescind the contract immediately if {b} is declared bankrupt.",
            (
                "This contract will come to an end before its expiry if either side serves a "
                "termination notice {days} days in advance."
            ),
            ("Following expiry or early termination, {b} must hand back all materials belonging to {a}."),
        ),
        "zh": (
            "{a}与{b}均有权在提前{days}天书面告知对方后撤销本合同。",
            "如{b}出现重大违约且在{days}天内未能补救，{a}可即刻终止合同。",
            "{b}被宣告破产的，{a}有权立即解约。",
            "任一方如欲提前结束合作，应提前{days}天向对方发出终止通知。",
            "合同期满或提前解除后，{b}须交还属于{a}的全部资料。",
        ),
    },
    "liability": {
        "en": (
            (
                "Under no circumstances will {a} be responsible to {b} for lost revenue, lost data "
                "or any special or consequential harm."
            ),
            "The cumulative liability of {a} arising out of this contract is limited to {amt}.",
            (
                "{a} and {b} shall each hold the other harmless from third-party claims caused by "
                "its own wrongful acts."
            ),
            (
                "The exclusions of liability of {a} in this section do not apply to gross "
                "negligence or wilful misconduct."
            ),
            (
                "{b} is answerable for any harm to the premises of {a} caused by the carelessness "
                "of its staff."
            ),
        ),
        "zh": (
            "{a}在任何情况下均无须就{b}的营业收入减少、数据丢失或其他特殊损害负责。",
            "{a}因本合同产生的累计赔偿额以{amt}为上限。",
            "{a}与{b}应使对方免于承担因其自身不当行为引起的第三方索赔。",
            "本条关于{a}免责的约定不适用于重大过失或故意不当行为。",
            "{b}工作人员疏忽造成{a}场所损失的，由{b}负责赔偿。",
        ),
    },
    "confidentiality": {
        "en": (
            (
                "{b} undertakes not to reveal any proprietary or non-public information received "
                "from {a} to outsiders."
            ),
            (
                "Information marked as confidential must be protected by {b} with at least the "
                "same care as it uses for its own sensitive data."
            ),
            "The duty of secrecy of {b} survives for {years} years after this contract expires.",
            (
                "{a} must not publish or share the business secrets of {b} except where a "
                "regulator requires it."
            ),
            ("{a} and {b} shall keep the contents of this contract strictly confidential for {years} years."),
        ),
        "zh": (
            "{b}承诺不向外部人员泄露从{a}处获取的任何专有或非公开资料。",
            "标明为机密的资料，{b}应以不低于保护自身敏感数据的谨慎程度加以保护。",
            "{b}保守秘密的义务在本合同期满后{years}年内仍然有效。",
            "除监管机构依法要求外，{a}不得公开或分享{b}的商业秘密。",
            "{a}与{b}应在{years}年内对本合同的内容严格保密。",
        ),
    },
    "force_majeure": {
        "en": (
            (
                "Neither {a} nor {b} is responsible for non-performance resulting from "
                "circumstances outside its control, for example storms, pandemics or civil unrest."
            ),
            (
                "The party hindered by an unforeseeable and unavoidable event must inform the "
                "other side within {days} days and supply official certification."
            ),
            (
                "Where an act of God prevents delivery by {a}, the time for performance is "
                "extended by the duration of the delay, up to {days} days."
            ),
            (
                "The obligations of {a} are suspended while a force majeure situation persists, "
                "and resume within {days} days after it ends."
            ),
            (
                "Typhoons, earthquakes, wars and strikes are treated as force majeure in the "
                "relationship between {a} and {b}."
            ),
        ),
        "zh": (
            "因台风、疫情或社会动乱等无法控制的情形导致未能履约的，{a}与{b}均不负责任。",
            ("遭遇不能预见、不能避免且不能克服的客观情况的一方，应在{days}天内告知对方并提供官方证明。"),
            "因天灾导致{a}无法按期交货的，履行期限相应顺延，最长{days}天。",
            "不可抗力情形存续期间，{a}的义务暂停履行，情形消除后{days}天内恢复履行。",
            "台风、地震、战争和罢工均属于{a}与{b}之间本合同所称的不可抗力。",
        ),
    },
    "governing_law": {
        "en": (
            "This contract is to be interpreted under the law of {law}.",
            (
                "The rights and duties of {a} and {b} shall be determined according to the "
                "legislation of {law}."
            ),
            (
                "All questions concerning the construction of this contract will be decided by the "
                "law in force in {law}."
            ),
            (
                "{a} and {b} submit to the exclusive jurisdiction of the courts of {city} and to "
                "the law of {law}."
            ),
            "The proper law of this contract is the law of {law}.",
        ),
        "zh": (
            "本合同依照{law}的法律进行解释。",
            "{a}与{b}的权利义务应依据{law}现行法律确定。",
            "凡涉及本合同解释的问题，均以{law}现行有效的法律为准。",
            "{a}与{b}接受{city}法院的专属管辖，并以{law}法律为准据法。",
            "本合同的准据法为{law}法律。",
        ),
    },
    "liquidated_damages": {
        "en": (
            (
                "A breaching party must compensate the other with a pre-agreed sum of {amt} "
                "irrespective of the actual loss."
            ),
            (
                "Late delivery will attract a daily charge of {pct}% of the order value, payable "
                "by {a} as agreed damages."
            ),
            ("The agreed compensation owed by {a} for each day of delay is capped at {pct2}% of the price."),
            (
                "{b} shall owe {a} liquidated damages equal to {pct2}% of the contract value if it "
                "withdraws from the contract."
            ),
            (
                "The stipulated sum of {amt} for delay represents a reasonable estimate of harm "
                "and is not a penalty."
            ),
        ),
        "zh": (
            "违约一方须按约定向对方支付{amt}的赔偿金，而不论实际损失多少。",
            "延迟交付的，{a}应每日按订单金额的{pct}%支付约定赔偿。",
            "{a}每日延误的约定赔偿以价款的{pct2}%为上限。",
            "{b}中途退出本合同的，应向{a}支付相当于合同金额{pct2}%的违约金。",
            "约定的延误赔偿金额{amt}为对损害的合理估计，不属于罚款。",
        ),
    },
    "deposit": {
        "en": (
            (
                "{b} will lodge earnest money of {amt} with {a} as security for the conclusion of "
                "the contract."
            ),
            (
                "Should {a}, as the recipient of the earnest money, default, it must repay double "
                "the amount received."
            ),
            ("The sum of {amt} paid in advance as a deposit will be offset against the final instalment."),
            (
                "A deposit amounting to {pct2}% of the price is due from {b} upon signing and is "
                "forfeited if {b} withdraws."
            ),
            (
                "If {b} defaults, {a} may keep the earnest money; if {a} defaults, it shall return "
                "it twice over."
            ),
        ),
        "zh": (
            "{b}须向{a}交存定金{amt}，以担保本合同的订立。",
            "收取定金的{a}违约的，应向{b}返还两倍于所收定金的款项。",
            "{b}预先交付的定金{amt}将冲抵最后一期款项。",
            "签约时{b}应交付相当于价款{pct2}%的定金，{b}反悔的，定金不予退还。",
            "{b}违约的，{a}可没收定金；{a}违约的，应双倍退还。",
        ),
    },
}

# Eval only. Each sentence creates an obligation of its label's type and merely mentions
# another type (noted in the trailing comment) as trigger, reference or exception.
_CONFLICT_TEMPLATES: dict[str, dict[str, tuple[str, ...]]] = {
    "payment": {
        "en": (
            # termination
            (
                "{b} must pay the fee of {amt} within {days} days of invoice, and late payment "
                "does not by itself give {a} a right of termination."
            ),
            # deposit
            (
                "{b} shall pay the balance of {amt} within {days} days, after deducting the "
                "deposit already received by {a}."
            ),
            # termination
            (
                "Fees for services rendered before termination remain payable by {b} within {days} "
                "days of the final invoice."
            ),
        ),
        "zh": (
            "{b}应在收到发票后{days}天内支付{amt}，逾期付款本身不构成{a}解除合同的理由。",
            "{b}应在扣除{a}已收取的定金后，于{days}天内支付剩余价款{amt}。",
            "合同终止前已提供服务的费用，{b}仍应在收到最终发票后{days}天内支付。",
        ),
    },
    "termination": {
        "en": (
            # payment
            (
                "{a} may terminate this contract on written notice if {b} fails to pay any invoice "
                "within {days} days of its due date."
            ),
            # confidentiality
            (
                "{a} may terminate this contract immediately if {b} discloses confidential "
                "information in breach of its duty of secrecy."
            ),
            # liquidated_damages
            (
                "{a} may terminate this contract with immediate effect once the liquidated damages "
                "owed by {b} reach {amt}."
            ),
        ),
        "zh": (
            "{b}逾期{days}天仍未支付任何款项的，{a}有权书面通知解除本合同。",
            "{b}违反保密义务泄露保密信息的，{a}有权立即解除本合同。",
            "{b}累计应付违约金达到{amt}的，{a}有权立即解除本合同。",
        ),
    },
    "liability": {
        "en": (
            # confidentiality
            (
                "The total liability of {a}, including any liability for breach of "
                "confidentiality, shall not exceed {amt}."
            ),
            # termination
            (
                "Except for fraud, {a} shall not be liable for any loss suffered by {b} after "
                "termination of this contract."
            ),
            # payment
            (
                "The fees paid by {b} in the last {months} months are the upper limit of the "
                "liability of {a} for all claims."
            ),
        ),
        "zh": (
            "{a}的赔偿责任总额（包括违反保密义务的责任）不超过{amt}。",
            "除欺诈外，{a}不对{b}在本合同终止后遭受的任何损失承担责任。",
            "{b}在最近{months}个月内支付的费用为{a}对全部索赔承担责任的上限。",
        ),
    },
    "confidentiality": {
        "en": (
            # termination
            (
                "The confidentiality obligations of {b} survive the termination of this contract "
                "for {years} years."
            ),
            # payment
            (
                "{b} shall keep the amount of each payment and the pricing terms agreed with {a} "
                "strictly confidential."
            ),
            # governing_law
            (
                "{b} may disclose confidential information of {a} only where the law of {law} or a "
                "court order requires it."
            ),
        ),
        "zh": (
            "{b}的保密义务在本合同解除后{years}年内继续有效。",
            "{b}应对每笔付款金额及与{a}约定的价格条款严格保密。",
            "仅在{law}法律或法院命令要求时，{b}方可披露{a}的保密信息。",
        ),
    },
    "force_majeure": {
        "en": (
            # payment
            (
                "Neither {a} nor {b} is liable for failure to perform caused by force majeure, but "
                "this does not excuse {b} from paying sums already due."
            ),
            # liquidated_damages
            (
                "A force majeure event affecting {a} shall not be treated as a breach, and no "
                "liquidated damages accrue for the delay it causes."
            ),
            # termination
            (
                "If force majeure prevents {a} from performing, its obligations are suspended, and "
                "the contract does not terminate for the first {days} days."
            ),
        ),
        "zh": (
            "因不可抗力导致不能履行的，{a}不承担责任，但{b}仍应支付已到期的款项。",
            "影响{a}的不可抗力事件不视为违约，因其造成的延误不产生违约金。",
            "{a}因不可抗力不能履行的，其义务予以中止，合同在前{days}天内不因此解除。",
        ),
    },
    "governing_law": {
        "en": (
            # confidentiality
            (
                "This contract, including its confidentiality provisions, shall be governed by the "
                "laws of {law}."
            ),
            # termination
            (
                "Any dispute between {a} and {b} about the termination of this contract shall be "
                "determined under the laws of {law}."
            ),
            # liquidated_damages
            ("The laws of {law} govern this contract, including any claim by {a} for liquidated damages."),
        ),
        "zh": (
            "本合同（包括其中的保密条款）适用{law}法律。",
            "{a}与{b}之间与本合同解除有关的任何争议，均依照{law}法律处理。",
            "本合同适用{law}法律，包括{a}提出的任何关于违约金的请求。",
        ),
    },
    "liquidated_damages": {
        "en": (
            # payment
            (
                "If {b} fails to make any payment when due, {b} shall pay liquidated damages of "
                "{pct}% of the overdue amount per day."
            ),
            # confidentiality
            (
                "A party that breaches its confidentiality obligations shall pay liquidated "
                "damages of {amt} to the other party."
            ),
            # termination
            ("If {a} terminates this contract without cause, {a} shall pay {b} liquidated damages of {amt}."),
        ),
        "zh": (
            "{b}逾期付款的，每日应按逾期金额的{pct}%支付违约金。",
            "违反保密义务的一方应向对方支付违约金{amt}。",
            "{a}无故解除本合同的，应向{b}支付违约金{amt}。",
        ),
    },
    "deposit": {
        "en": (
            # payment
            (
                "The deposit of {amt} paid by {b} shall be credited towards the first payment "
                "under this contract."
            ),
            # termination
            (
                "If this contract is terminated because of a default by {b}, {a} may retain the "
                "deposit of {amt}."
            ),
            # liquidated_damages
            (
                "The deposit of {amt} paid by {b} is not liquidated damages, and {a} shall return "
                "it on completion."
            ),
        ),
        "zh": (
            "{b}支付的定金{amt}在合同履行时抵作首期价款。",
            "因{b}违约导致合同解除的，{a}有权不予返还定金{amt}。",
            "{b}支付的定金{amt}不视为违约金，合同履行完毕后{a}应予返还。",
        ),
    },
}

# Unrelated contract boilerplate for `long_contract` and `mixed_language`. None of these
# sentences is a clause of one of the CLAUSE_TYPES.
_BOILERPLATE = {
    "en": (
        (
            "This contract is made on the date of the last signature below between the parties "
            "identified in the preamble."
        ),
        "Headings are inserted for ease of reference only.",
        (
            "Words in the singular include the plural and references to a person include a company "
            "or other organisation."
        ),
        (
            "Any notice under this contract shall be in writing and delivered by hand, courier or "
            "email to the address set out in the preamble."
        ),
        ("A notice delivered by courier is deemed received on the second business day after dispatch."),
        (
            "No amendment to this contract is effective unless it is in writing and signed by "
            "authorised representatives of both parties."
        ),
        (
            "This contract constitutes the entire agreement between the parties and supersedes all "
            "prior discussions relating to its subject matter."
        ),
        (
            "If any provision of this contract is found to be invalid, the remaining provisions "
            "continue in full force and effect."
        ),
        "No failure or delay in exercising any right operates as a waiver of that right.",
        (
            "Neither party may assign or transfer its rights under this contract without the prior "
            "written consent of the other party."
        ),
        ("This contract may be executed in any number of counterparts, each of which is an original."),
        (
            "Nothing in this contract creates a partnership, joint venture or agency relationship "
            "between the parties."
        ),
        (
            "The goods shall be delivered to the address specified in each purchase order during "
            "normal business hours."
        ),
        (
            "The goods shall be packed in a manner suitable for transport and clearly labelled "
            "with the order number."
        ),
        (
            "Each party shall appoint a project manager who will act as the main point of contact "
            "for day-to-day matters."
        ),
        (
            "The project managers shall meet at least once a month to review progress against the "
            "agreed schedule."
        ),
        (
            "The services shall be performed by suitably qualified personnel in accordance with "
            "good industry practice."
        ),
        ("Each party shall comply with the site safety rules when visiting the premises of the other party."),
        (
            "The specifications of the products are set out in Schedule 1 and may be updated by "
            "agreement from time to time."
        ),
        ("Acceptance testing shall take place within ten business days after installation of the equipment."),
        (
            "Each party shall maintain accurate records of the work carried out under this "
            "contract in accordance with its internal policies."
        ),
        (
            "A party may engage subcontractors to perform part of the services, provided that it "
            "informs the other party in advance."
        ),
        (
            "The schedules to this contract form part of it and references to this contract "
            "include the schedules."
        ),
        "Each party warrants that it has full power and authority to enter into this contract.",
        (
            "Any change to the scope of the services shall be documented in a change request "
            "signed by both project managers."
        ),
        "The parties shall cooperate in good faith to implement this contract efficiently.",
        (
            "Each party shall provide reasonable access to its premises and systems as needed for "
            "the installation work."
        ),
        "Training sessions for operating staff will be held at a location agreed by the parties.",
        ("Spare parts for the equipment shall remain available for at least five years after delivery."),
        "Time periods expressed in days refer to calendar days unless stated otherwise.",
        ("Each party shall designate an authorised signatory for documents issued under this contract."),
        ("The delivery schedule in Schedule 2 sets out the milestones for each phase of the project."),
        (
            "Each delivery shall be accompanied by a packing list that identifies the items and "
            "quantities shipped."
        ),
        "Progress reports shall be submitted in the format agreed at the kick-off meeting.",
        "The parties shall hold a steering committee meeting every quarter to discuss the roadmap.",
        ("Each party shall ensure that its staff follow the reasonable instructions of the site manager."),
        "Software updates will be installed during a maintenance window agreed in advance.",
        "References to a statute include that statute as amended from time to time.",
        ("The operating manuals shall be provided in electronic form together with the equipment."),
        (
            "Any technical questions from operating staff shall be directed to the helpdesk during "
            "office hours."
        ),
    ),
    "zh": (
        "本合同自双方授权代表签字并加盖公章之日起生效。",
        "本合同中的标题仅为方便阅读而设，不影响条款的含义。",
        "本合同所称“日”均指日历日，另有说明的除外。",
        "一方向另一方发出的通知应以书面形式送达本合同首页所列地址。",
        "以快递方式发送的通知，于寄出后第二个工作日视为送达。",
        "对本合同的任何修改须以书面形式作出，并经双方授权代表签字。",
        "本合同构成双方就合同标的达成的完整协议，取代此前的一切口头或书面沟通。",
        "本合同任何条款被认定无效的，不影响其他条款的效力。",
        "一方未行使或迟延行使本合同项下的任何权利，不构成对该权利的放弃。",
        "未经对方事先书面同意，任何一方不得转让其在本合同项下的权利。",
        "本合同一式两份，双方各执一份，具有同等效力。",
        "本合同不在双方之间建立合伙、合资或代理关系。",
        "货物应在正常工作时间内送至采购订单载明的交货地点。",
        "货物应采用适合运输的包装，并在外包装上清楚标明订单编号。",
        "双方应各自指定一名项目经理，作为日常事务的主要联系人。",
        "项目经理每月至少召开一次会议，检查项目进度。",
        "服务应由具备相应资质的人员按照行业通行标准提供。",
        "一方人员进入对方场所时，应遵守对方的安全管理规定。",
        "产品规格详见附件一，经双方协商可不时更新。",
        "设备安装完成后十个工作日内进行验收测试。",
        "双方应妥善保存与本合同履行有关的工作记录。",
        "一方可将部分服务分包给第三方，但应事先通知对方。",
        "本合同附件是本合同不可分割的组成部分。",
        "双方均保证其具有签订本合同的完全权利和授权。",
        "服务范围的任何变更均应以变更申请单的形式记录，并由双方项目经理签字确认。",
        "双方应本着诚信原则相互配合，高效执行本合同。",
        "一方应为对方的安装工作提供必要的场地、水电和资料。",
        "操作人员的培训在双方商定的地点进行。",
        "设备的备品备件在交货后至少五年内保证供应。",
        "双方应各自指定授权签字人负责签署本合同项下的文件。",
        "附件二所列进度计划载明了项目各阶段的里程碑。",
        "每批货物均应附有装箱单，列明所发货物的名称和数量。",
        "项目进度报告应按照启动会上商定的格式提交。",
        "双方每季度召开一次指导委员会会议，讨论后续工作安排。",
        "一方人员应遵守现场负责人的合理指示。",
        "软件更新应在双方事先商定的维护时段内进行。",
        "设备操作手册应以电子形式随设备一并提供。",
        "操作人员的技术问题应在办公时间内向服务台提出。",
        "本合同所述的工作日不包括法定节假日和周末。",
        "双方的联系人如有变更，应及时以书面形式告知对方。",
    ),
}

_PARTIES = {
    ("en", "train"): (
        ("the Supplier", "the Customer"),
        ("the Seller", "the Buyer"),
        ("the Service Provider", "the Client"),
        ("Northwind Traders Ltd.", "Bluestone Retail plc"),
        ("Acme Logistics Inc.", "Harbor Foods LLC"),
        ("Orion Software GmbH", "Maple Health Inc."),
        ("Pinecrest Media Ltd.", "Atlas Engineering Co."),
        ("the Company", "the Distributor"),
    ),
    ("en", "eval"): (
        ("the Licensor", "the Licensee"),
        ("the Contractor", "the Employer"),
        ("the Vendor", "the Purchaser"),
        ("Redwood Analytics Corp.", "Silverline Bank N.A."),
        ("Kestrel Mining Pty Ltd", "Lumen Energy SA"),
    ),
    ("zh", "train"): (
        ("甲方", "乙方"),
        ("卖方", "买方"),
        ("服务方", "客户"),
        ("华信科技有限公司", "东方贸易有限公司"),
        ("北京星辰软件有限公司", "上海云帆物流有限公司"),
        ("承包人", "发包人"),
        ("广源实业有限公司", "明德教育科技有限公司"),
        ("供应商", "采购方"),
    ),
    ("zh", "eval"): (
        ("出租方", "承租方"),
        ("委托方", "受托方"),
        ("供方", "需方"),
        ("深圳海川电子有限公司", "杭州青禾食品有限公司"),
        ("成都锦程建设有限公司", "南京博远医药有限公司"),
    ),
}

_SLOT_VALUES = {
    "train": {
        "days": (7, 10, 15, 30, 60, 90),
        "years": (1, 2, 3, 5),
        "months": (6, 12),
        "agr_en": ("Agreement", "Contract"),
        "agr_zh": ("合同", "协议"),
        "pct": ("0.1", "0.5", "1"),
        "pct2": ("10", "20"),
        "law_en": (
            "England and Wales",
            "the State of New York",
            "Singapore",
            "the State of Delaware",
            "Japan",
            "the Province of Ontario",
        ),
        "city_en": ("London", "New York", "Singapore", "Wilmington", "Tokyo", "Toronto"),
        "law_zh": ("中华人民共和国", "新加坡", "英国", "日本", "法国", "加拿大"),
        "city_zh": ("北京", "上海", "深圳", "苏州", "厦门", "青岛"),
    },
    "eval": {
        "days": (5, 14, 20, 21, 45, 120),
        "years": (4, 6, 7, 10),
        "months": (3, 24),
        "agr_en": ("contract",),
        "agr_zh": ("合同",),
        "pct": ("0.05", "0.3", "2"),
        "pct2": ("5", "15"),
        "law_en": ("Switzerland", "the State of California", "Hong Kong", "Germany", "France"),
        "city_en": ("Geneva", "San Francisco", "Hong Kong", "Frankfurt", "Paris"),
        "law_zh": ("香港特别行政区", "瑞士", "德国", "澳大利亚"),
        "city_zh": ("广州", "天津", "武汉", "西安"),
    },
}

# Scan errors: (clean, misread) pairs.
_OCR_EN = (
    ("rn", "m"),
    ("m", "rn"),
    ("cl", "d"),
    ("d", "cl"),
    ("li", "h"),
    ("l", "1"),
    ("i", "l"),
    ("I", "l"),
    ("O", "0"),
    ("o", "0"),
    ("e", "c"),
    ("S", "5"),
    ("B", "8"),
    ("g", "q"),
    ("h", "b"),
    ("w", "vv"),
    ("t", "f"),
    ("u", "v"),
)
_OCR_ZH = {
    "已": "己",
    "己": "已",
    "未": "末",
    "末": "未",
    "土": "士",
    "士": "土",
    "人": "入",
    "入": "人",
    "日": "曰",
    "天": "夭",
    "千": "干",
    "于": "干",
    "本": "木",
    "方": "万",
    "金": "全",
    "约": "钓",
    "付": "什",
    "任": "仕",
    "责": "贵",
    "合": "台",
    "大": "太",
    "密": "蜜",
    "款": "欵",
    "赔": "培",
    "偿": "尝",
    "违": "讳",
    "损": "捐",
    "期": "朋",
    "同": "司",
    "内": "丙",
    "应": "庖",
    "法": "怯",
    "律": "津",
    "定": "淀",
    "货": "贷",
    "失": "矢",
    "息": "悤",
}
_OCR_PUNCTUATION = {"，": ",", "。": ".", "；": ";", "：": ":", "（": "(", "）": ")"}


def _script_language(text: str) -> str:
    # Same rule the backends use to pick the answer language (engines.backends.base.language_of).
    cjk = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")
    latin = sum(1 for ch in text if ch.isascii() and ch.isalpha())
    return "zh" if cjk > latin else "en"


def _slots_draw(*, rng: random.Random, language: str, split: str) -> dict[str, str]:
    values = _SLOT_VALUES[split]
    a, b = rng.choice(_PARTIES[(language, split)])
    if language == "en" and split == "train":
        amount = f"{rng.choice(('USD', 'EUR', 'GBP'))} {rng.randrange(2, 60) * 5000:,}"
    elif language == "en":
        amount = f"{rng.choice(('CHF', 'SGD', 'AUD'))} {rng.randrange(1000, 99000):,}"
    elif split == "train":
        amount = f"人民币{rng.randrange(2, 200)}万元"
    else:
        amount = f"港币{rng.randrange(1000, 990000):,}元"
    return {
        "a": a,
        "b": b,
        "amt": amount,
        "days": str(rng.choice(values["days"])),
        "years": str(rng.choice(values["years"])),
        "months": str(rng.choice(values["months"])),
        "pct": str(rng.choice(values["pct"])),
        "pct2": str(rng.choice(values["pct2"])),
        "law": str(rng.choice(values[f"law_{language}"])),
        "city": str(rng.choice(values[f"city_{language}"])),
        "agr": str(rng.choice(values[f"agr_{language}"])),
    }


def _clause_render(
    *, rng: random.Random, templates: tuple[str, ...], language: str, split: str, seen: set[str]
) -> str:
    """A filled template not in `seen` (which it joins)."""
    for _ in range(200):
        text = rng.choice(templates).format_map(_slots_draw(rng=rng, language=language, split=split))
        text = text[0].upper() + text[1:]
        if text not in seen:
            seen.add(text)
            return text
    raise RuntimeError(f"templates too few to draw a new {language} {split} clause")


def _boilerplate_draw(*, rng: random.Random, language: str, size: int) -> list[str]:
    """Distinct boilerplate sentences totalling at least `size` words (characters for zh)."""
    pool = list(_BOILERPLATE[language])
    rng.shuffle(pool)
    chosen: list[str] = []
    total = 0
    for sentence in pool:
        if total >= size:
            break
        chosen.append(sentence)
        total += len(sentence.split()) if language == "en" else len(sentence)
    return chosen


def _long_contract_build(*, rng: random.Random, clause: str, language: str) -> str:
    size = rng.randint(300, 600) if language == "en" else rng.randint(450, 900)
    sentences = _boilerplate_draw(rng=rng, language=language, size=size)
    sentences.insert(rng.randint(0, len(sentences)), clause)
    sections = []
    for number, start in enumerate(range(0, len(sentences), 3), start=1):
        chunk = sentences[start : start + 3]
        if language == "en":
            sections.append(f"{number}. " + " ".join(chunk))
        else:
            sections.append(f"第{number}条 " + "".join(chunk))
    title = "SERVICES AND SUPPLY CONTRACT" if language == "en" else "服务与供货合同"
    return title + "\n\n" + "\n\n".join(sections)


def _mixed_build(*, rng: random.Random, clause: str, clause_language: str) -> str:
    """The clause as an article of a contract in the other language, next to one of its sentences."""
    host = "zh" if clause_language == "en" else "en"
    heading = f"第{rng.randint(3, 19)}条" if host == "zh" else f"Clause {rng.randint(3, 19)}."
    other = rng.choice(_BOILERPLATE[host])
    if rng.random() < 0.5:
        return f"{heading} {clause}\n{other}"
    return f"{heading} {other}\n{clause}"


def _ocr_en(*, rng: random.Random, text: str) -> str:
    words = text.split(" ")
    for i, word in enumerate(words):
        if rng.random() < 0.3:
            options = [(clean, bad) for clean, bad in _OCR_EN if clean in word]
            if options:
                clean, bad = rng.choice(options)
                at = rng.choice([m.start() for m in re.finditer(re.escape(clean), word)])
                words[i] = word[:at] + bad + word[at + len(clean) :]
    out = words[0]
    for word in words[1:]:
        roll = rng.random()
        if roll < 0.08:  # dropped space
            out += word
        elif roll < 0.14 and len(word) >= 6:  # word broken in two
            cut = rng.randint(2, len(word) - 2)
            out += " " + word[:cut] + " " + word[cut:]
        else:
            out += " " + word
    return out


def _ocr_zh(*, rng: random.Random, text: str) -> str:
    out = []
    for ch in text:
        roll = rng.random()
        if ch in _OCR_ZH and roll < 0.4:
            out.append(_OCR_ZH[ch])
        elif ch in _OCR_PUNCTUATION and roll < 0.5:
            out.append(_OCR_PUNCTUATION[ch])
        elif "\u4e00" <= ch <= "\u9fff" and roll < 0.03:  # dropped character
            continue
        else:
            out.append(ch)
            if "\u4e00" <= ch <= "\u9fff" and rng.random() < 0.05:  # stray space
                out.append(" ")
    return "".join(out)


def _ocr_apply(*, rng: random.Random, text: str, language: str) -> str:
    for _ in range(20):  # almost always the first try; re-roll the rare no-op
        noisy = (_ocr_en if language == "en" else _ocr_zh)(rng=rng, text=text)
        if noisy != text:
            return noisy
    raise RuntimeError("OCR noise left the text unchanged")


def _item_make(*, item_id: str, text: str, label: str, language: str, tags: tuple[str, ...]) -> DemoItem:
    answer_language = _script_language(text) if language == "mixed" else language
    return DemoItem(
        id=item_id,
        input=text,
        label=label,
        reference=ANSWERS[label][answer_language],
        language=language,
        tags=tags,
    )


def _eval_cell_build(
    *, rng: random.Random, label: str, language: str, rotation: int, seen: set[str]
) -> list[DemoItem]:
    hard = EVAL_PER_CELL - EVAL_PLAIN_PER_CELL
    # 13 hard items over 4 tags: which tag gets the 4th rotates with the label (the same for both
    # languages), so the totals balance.
    counts = {tag: hard // len(HARD_TAGS) for tag in HARD_TAGS}
    for k in range(hard % len(HARD_TAGS)):
        counts[HARD_TAGS[(rotation + k) % len(HARD_TAGS)]] += 1
    plan = ["plain"] * EVAL_PLAIN_PER_CELL + [t for t in HARD_TAGS for _ in range(counts[t])]

    clauses: set[str] = set()  # no clause twice within the cell
    items = []
    for k, tag in enumerate(plan):
        source = _CONFLICT_TEMPLATES if tag == "clause_conflict" else _EVAL_TEMPLATES
        text = _clause_render(
            rng=rng,
            templates=source[label][language],
            language=language,
            split="eval",
            seen=clauses,
        )
        if tag == "long_contract":
            text = _long_contract_build(rng=rng, clause=text, language=language)
        elif tag == "mixed_language":
            text = _mixed_build(rng=rng, clause=text, clause_language=language)
        elif tag == "ocr_noise":
            text = _ocr_apply(rng=rng, text=text, language=language)
        if text in seen:
            raise RuntimeError(f"duplicate eval input: {text[:60]!r}")
        seen.add(text)
        items.append(
            _item_make(
                item_id=f"eval-{label}-{language}-{k:02d}",
                text=text,
                label=label,
                language="mixed" if tag == "mixed_language" else language,
                tags=(tag,),
            )
        )
    return items


def demo_dataset_build(*, seed: int = 0) -> DemoDataset:
    """The SYNTHETIC contract-assistant data: 960 clean train items, 320 tagged eval items.

    Eval is balanced: 20 items per (label, language), of which 7 plain and 13 spread over
    HARD_TAGS (52 items per hard tag overall).
    """
    rng = random.Random(seed)
    train: list[DemoItem] = []
    evaluation: list[DemoItem] = []
    train_seen: set[str] = set()
    eval_seen: set[str] = set()
    for rotation, label in enumerate(CLAUSE_TYPES):
        for language in ("en", "zh"):
            for k in range(TRAIN_PER_CELL):
                text = _clause_render(
                    rng=rng,
                    templates=_TRAIN_TEMPLATES[label][language],
                    language=language,
                    split="train",
                    seen=train_seen,
                )
                train.append(
                    _item_make(
                        item_id=f"train-{label}-{language}-{k:02d}",
                        text=text,
                        label=label,
                        language=language,
                        tags=("plain",),
                    )
                )
            evaluation += _eval_cell_build(
                rng=rng, label=label, language=language, rotation=rotation, seen=eval_seen
            )
    return DemoDataset(train=tuple(train), eval=tuple(evaluation))


def demo_suite_jsonl(*, items: tuple[DemoItem, ...] | list[DemoItem]) -> str:
    """The items as an eval-suite JSONL file (one JSON object per line, UTF-8 text)."""
    lines = [
        json.dumps(
            {
                "id": item.id,
                "input": item.input,
                "label": item.label,
                "reference": item.reference,
                "language": item.language,
                "tags": list(item.tags),
            },
            ensure_ascii=False,
        )
        for item in items
    ]
    return "\n".join(lines) + "\n"
