"""The answer judge of the clean-accuracy layer: a registered chat version that judges free-text
answers with a rubric (`engines.scoring.judge`), admitted only once its agreement with people on a
labelled file is measured and clears the policy's bar.

`answer_judge_prepare` reads the labelled answers (a file inside EVALHUB_LABELS_DIR), asks the judge
about each, and measures its Cohen's kappa with people, and that of the BERTScore/chrF cut-offs on
the same answers (the offline default, shown beside it). An admitted judge then decides the layer's
free-text answers (`AnswerJudge.__call__`, what `answers_judge` takes as `judge`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from engines.backends.base import Prediction, Usage
from engines.reasons import Reason, reason
from engines.scoring.judge import (
    Agreement,
    LabelledAnswer,
    agreement_measure,
    answer_judge_prompt,
    answer_verdict_parse,
    labelled_answers_parse,
)
from gate.cost import VersionCost
from gate.judges.clean_accuracy import (
    AnswerJudgeDetails,
    CleanAccuracyCode,
    CleanAccuracyPolicy,
    answer_judge_admit,
)
from gate.layers.base import LayerContext
from gate.layers.model import versions_cost
from gate.layers.outputs import model_outputs_predict
from registry.errors import ApplicationError
from registry.models import ModelVersion
from registry.selectors.versions import model_version_get


class AnswerJudgeUnusable(Exception):
    """The judge cannot be measured at all (no such chat version, a labelled file that cannot be
    read): the layer is `error`, with `reason`."""

    def __init__(self, why: Reason):
        super().__init__(str(why))
        self.reason = why


@dataclass
class AnswerJudge:
    """A judge version asked about (question, reference, answer) triples; what it spent adds up."""

    version: ModelVersion
    batch_size: int
    use_cache: bool
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0
    device: str = "remote"
    judged: int = 0
    unreadable: int = 0

    def verdicts(self, triples: Sequence[tuple[str, str, str]]) -> list[bool | None]:
        """Each triple's verdict (None: unreadable, or the judge's call errored)."""
        prompts = [answer_judge_prompt(question=q, reference=r, answer=a) for q, r, a in triples]
        outputs = model_outputs_predict(
            version=self.version,
            texts=prompts,
            batch_size=self.batch_size,
            on_batch=lambda _: None,  # the layer's progress counts the versions' answers
            use_cache=self.use_cache,
        )
        self.usage += outputs.usage
        self.seconds += outputs.seconds
        self.device = outputs.device
        return [_verdict(p) for p in outputs.predictions]

    def __call__(self, triples: Sequence[tuple[str, str, str]]) -> list[bool]:
        """Free-text answers decided: an unreadable verdict counts the answer wrong (and is counted)."""
        verdicts = self.verdicts(triples)
        self.judged += len(verdicts)
        self.unreadable += sum(v is None for v in verdicts)
        return [v is True for v in verdicts]

    def cost(self) -> VersionCost:
        pk = self.version.pk
        return versions_cost(
            versions=[self.version],
            usage={pk: self.usage},
            seconds={pk: self.seconds},
            devices={pk: self.device},
        )[0]


def _verdict(prediction: Prediction) -> bool | None:
    return None if prediction.error is not None else answer_verdict_parse(prediction.text)


def labels_path_resolve(*, path: str, root: Path | None = None) -> Path:
    """Where `path` points inside the labels folder once `..` and symlinks are resolved;
    AnswerJudgeUnusable when that is outside it."""
    folder = Path(root or settings.EVALHUB_LABELS_DIR).resolve()
    resolved = (folder / path).resolve()
    if not resolved.is_relative_to(folder):
        why = f"outside {folder}"
        raise AnswerJudgeUnusable(reason(CleanAccuracyCode.LABELS_UNREADABLE, path=path, why=why))
    return resolved


def _labels_read(path: str) -> tuple[list[LabelledAnswer], str]:
    resolved = labels_path_resolve(path=path)
    try:
        content = resolved.read_bytes()
        return labelled_answers_parse(content=content.decode("utf-8")), hashlib.sha256(content).hexdigest()
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise AnswerJudgeUnusable(reason(CleanAccuracyCode.LABELS_UNREADABLE, path=path, why=why)) from None


def _judge_version(ref: str) -> ModelVersion:
    try:
        version = model_version_get(ref=ref, field="answer_judge")
    except ApplicationError as exc:
        unusable = reason(CleanAccuracyCode.JUDGE_UNUSABLE, judge=ref, why=exc.reason)
        raise AnswerJudgeUnusable(unusable) from None
    if version.backend_kind != ModelVersion.BackendKind.OPENAI:
        why = f"a {version.backend_kind!r} version, not a chat endpoint ('openai')"
        raise AnswerJudgeUnusable(reason(CleanAccuracyCode.JUDGE_UNUSABLE, judge=ref, why=why))
    return version


def _default_verdicts(labelled: Sequence[LabelledAnswer], cutoffs: dict[str, float]) -> list[bool | None]:
    """The BERTScore/chrF cut-offs' verdicts on the labelled answers (an answer equal to its
    reference is right, as in `answers_judge`)."""
    from engines.device import device_select  # torch: only when free text is scored
    from engines.scoring.text import text_scores

    scores = text_scores(
        references=[a.reference for a in labelled],
        candidates=[a.answer for a in labelled],
        languages=[a.language for a in labelled],
        device=device_select(),
    )
    return [
        a.answer.strip() == a.reference.strip() or s.value >= cutoffs[s.metric]
        for a, s in zip(labelled, scores, strict=True)
    ]


@dataclass(frozen=True)
class JudgePrepared:
    """The judge measured: whether it may decide and why, its agreement with people and the cut-offs'."""

    judge: AnswerJudge
    admitted: bool
    why: Reason
    labels: str
    labels_hash: str
    judge_agreement: Agreement
    default_agreement: Agreement | None

    def details(
        self, *, section: CleanAccuracyPolicy, decide_on: str, cutoffs: dict[str, float]
    ) -> AnswerJudgeDetails:
        """What the layer stores of the judge (read after the layer's answers were judged)."""
        return AnswerJudgeDetails(
            judge=self.judge.version.ref,
            labels=self.labels,
            labels_hash=self.labels_hash,
            kappa_min=section.answer_judge_kappa_min,
            decide_on=decide_on,
            admitted=self.admitted,
            judge_agreement=self.judge_agreement,
            default_agreement=self.default_agreement,
            cutoffs=cutoffs,
            items_judged=self.judge.judged,
            unreadable=self.judge.unreadable,
            cost=self.judge.cost(),
        )


def answer_judge_prepare(*, ctx: LayerContext) -> JudgePrepared | None:
    """The policy's answer judge measured on its labelled answers (None: the policy names none).
    AnswerJudgeUnusable when the judge or the file cannot be had."""
    general, section = ctx.policy.general, ctx.policy.section(CleanAccuracyPolicy)
    if section.answer_judge is None:
        return None
    judge = AnswerJudge(
        version=_judge_version(section.answer_judge),
        batch_size=general.batch_size,
        use_cache=general.output_cache,
    )
    cutoffs = answer_cutoffs(general.text_cutoffs)
    if section.answer_judge_labels is None:
        empty = agreement_measure(human=[], judged=[], confidence=general.confidence)
        admitted, why = answer_judge_admit(
            judge=judge.version.ref, agreement=None, policy=section, decide_on=general.decide_on
        )
        return JudgePrepared(judge, admitted, why, "", "", empty, None)
    labelled, digest = _labels_read(section.answer_judge_labels)
    human = [a.correct for a in labelled]
    verdicts = judge.verdicts([(a.question, a.reference, a.answer) for a in labelled])
    agreement = agreement_measure(human=human, judged=verdicts, confidence=general.confidence)
    default = agreement_measure(
        human=human, judged=_default_verdicts(labelled, cutoffs), confidence=general.confidence
    )
    admitted, why = answer_judge_admit(
        judge=judge.version.ref, agreement=agreement, policy=section, decide_on=general.decide_on
    )
    return JudgePrepared(judge, admitted, why, section.answer_judge_labels, digest, agreement, default)


def answer_cutoffs(overrides: dict[str, float] | None) -> dict[str, float]:
    """The cut-offs in force: the shipped ones, with the policy's `text_cutoffs` over them."""
    from engines.scoring.text import TEXT_CUTOFFS

    return {**TEXT_CUTOFFS, **(overrides or {})}
