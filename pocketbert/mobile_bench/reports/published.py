"""The published comparison each task's headline stands beside: DistilBERT against BERT-base, as its paper gives it.

Sanh et al. 2019, "DistilBERT, a distilled version of BERT" (arXiv:1910.01108): 66 M parameters against BERT-base's
110 M; on SQuAD v1.1's dev set 77.7 EM / 85.8 F1 (79.1 / 86.9 with a second distillation step in fine-tuning, its
Table 2) against BERT-base's 88.5 F1 (Devlin et al. 2019, Table 2); on SST-2's dev set 91.3 against BERT-base's 92.7
(its Table 1); and "71 % faster than BERT" on an iPhone 7 Plus, running a question-answering model (its section 4.2).
A report prints the line beside the student's measured figures and never mixes it with them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

DISTILBERT_SOURCE = "Sanh et al. 2019, DistilBERT, arXiv:1910.01108"


@dataclass(frozen=True)
class PublishedLine:
    model: str
    parameters_m: float
    baseline_parameters_m: float
    metric: str
    value: float            # the published model's score, in the metric's own scale (F1 0..100, accuracy 0..1)
    baseline_value: float   # BERT-base's
    eval_set: str
    faster: str | None      # the published speed claim, as worded, with its device
    source: str

    def kept(self) -> float:
        return self.value / self.baseline_value

    def to_dict(self) -> dict:
        return {**asdict(self), "kept": self.kept()}

    def sentence(self) -> str:
        speed = f"{self.faster}, " if self.faster else ""
        return (f"Published beside it: {self.model} ({self.parameters_m:g} M parameters against BERT-base's "
                f"{self.baseline_parameters_m:g} M): {speed}{self.metric} {self.value:g} against BERT-base's "
                f"{self.baseline_value:g} on {self.eval_set}, {100 * self.kept():.1f} % kept ({self.source}).")


# One line a task (core/tasks/registry.py names the tasks).
PUBLISHED_LINES = {
    "qa": PublishedLine("DistilBERT", 66, 110, "f1", 86.9, 88.5, "SQuAD v1.1 dev (10,570 questions)",
                        "71 % faster than BERT-base on an iPhone 7 Plus running a question-answering model",
                        f"{DISTILBERT_SOURCE}, Table 2 and section 4.2; BERT-base: Devlin et al. 2019, Table 2"),
    "sentiment": PublishedLine("DistilBERT", 66, 110, "accuracy", 0.913, 0.927, "SST-2 dev (872 sentences)", None,
                               f"{DISTILBERT_SOURCE}, Table 1"),
}


def published_line(task_name: str) -> dict | None:
    line = PUBLISHED_LINES.get(task_name)
    return None if line is None else line.to_dict()
