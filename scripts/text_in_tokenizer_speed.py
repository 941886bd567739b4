"""What the exhaustive tokenizer costs an app: graph size and time per call of the text-in tokenizer graph at this
version against an earlier one, on the same texts in the same process.

    python scripts/text_in_tokenizer_speed.py ../shared/data f3aa47e > results/text_in/tokenizer_speed.json

Sentences: SST-2 dev (one text each, no offsets, as the sentiment model runs it); pairs: SQuAD dev questions with
their contexts (offsets on, as the QA model runs it). Both graphs are the tokenizer alone, at window 512, one
thread; each timing is the median of three passes over the texts.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from pocketbert.core.students.models import PACKAGED_TEACHER, resolve_model_source
from pocketbert.core.tasks.registry import text_in_string
from pocketbert.export.text_in import text_tokenizer
from pocketbert.export.text_in.session import text_session

SENTENCES = 872
PAIRS = 300
WINDOW = 512
PASSES = 3


def module_at(revision: str):
    for where in ("pocketbert/export/text_in/text_tokenizer.py", "pocketbert/export/text_tokenizer.py"):  # moved
        shown = subprocess.run(["git", "show", f"{revision}:{where}"], capture_output=True, text=True)
        if shown.returncode == 0:
            break
    shown.check_returncode()
    source = shown.stdout
    path = Path(tempfile.mkdtemp()) / "text_tokenizer_then.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("text_tokenizer_then", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(session, feeds_list: list[dict]) -> float:
    """Median over passes of the milliseconds per call."""
    passes = []
    for _ in range(PASSES):
        started = time.perf_counter()
        for feeds in feeds_list:
            session.run(None, feeds)
        passes.append((time.perf_counter() - started) * 1000 / len(feeds_list))
    return statistics.median(passes)


def main(data_dir: Path, baseline: str) -> dict:
    tokenizer_json = Path(resolve_model_source(PACKAGED_TEACHER)) / "tokenizer.json"
    lines = (data_dir / "sst2" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:SENTENCES + 1]
    sentences = [{"text": text_in_string(line.split("\t")[0])} for line in lines]
    squad = json.loads((data_dir / "squad" / "dev-v1.1.json").read_text(encoding="utf-8"))["data"]
    pairs = [{"question": text_in_string(qa["question"]), "context": text_in_string(paragraph["context"])}
             for article in squad for paragraph in article["paragraphs"] for qa in paragraph["qas"]][:PAIRS]
    figures = {}
    for name, module in (("before", module_at(baseline)), ("after", text_tokenizer)):
        single = module.tokenizer_graph(tokenizer_json, ("text",), WINDOW, 17, 8)
        pair = module.tokenizer_graph(tokenizer_json, ("question", "context"), WINDOW, 17, 8, offsets=True)
        figures[name] = {"single_graph_bytes": single.ByteSize(), "pair_graph_bytes": pair.ByteSize(),
                         "ms_per_sentence": round(timed(text_session(single.SerializeToString(), threads=1),
                                                        sentences), 3),
                         "ms_per_pair": round(timed(text_session(pair.SerializeToString(), threads=1), pairs), 3)}
    return {"date": date.today().isoformat(), "baseline": baseline,
            "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip(),
            "sentences": len(sentences), "pairs": len(pairs), "window": WINDOW, "threads": 1, **figures,
            "ratios_after_over_before": {key: round(figures["after"][key] / figures["before"][key], 3)
                                         for key in figures["after"]}}


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or not (Path(sys.argv[1]) / "sst2" / "dev.tsv").is_file():
        sys.exit("error: give the data folder (with sst2/dev.tsv) and optionally a commit; usage: python "
                 "scripts/text_in_tokenizer_speed.py DATA_DIR [COMMIT] > results/text_in/tokenizer_speed.json")
    print(json.dumps(main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "HEAD~1"), indent=1))
