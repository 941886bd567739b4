"""What the text-in tokenizer graph costs an app, and the exhaustive check: graph size and time per call at this
version against an earlier one, on the same texts in the same process.

    python scripts/text_in_tokenizer_speed.py ../shared/data 5a9703e > results/text_in/tokenizer_speed_2026-12-02.json

Sentences: SST-2 dev (one text each, no offsets, as the sentiment model runs it); pairs: SQuAD dev questions with
their contexts (offsets on, as the QA model runs it), both at window 512; probe texts: what the exhaustive check
feeds its graph (tokenizer_check.PROBES_PER_TEXT code points inside a word, "a<c>b", one text; a pair gives the
same text as question and context, with offsets). The tokenizer graphs alone, one thread. The versions take turns
pass by pass (a host's speed drifts within a minute); each timing is the fastest of the passes.
"""

from __future__ import annotations

import importlib.util
import json
import math
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
PROBE_TEXTS = 60
PROBE_STEP = 97  # every 97th code point: all planes, a few thousand probes
WINDOW = 512
PASSES = 5


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


def probe_texts() -> list[str]:
    from pocketbert.export.checks.tokenizer_probes import CONTEXTS, code_points
    from pocketbert.export.text_in.tokenizer_check import PROBES_PER_TEXT

    codes = [c for c in code_points() if c][::PROBE_STEP][:PROBE_TEXTS * PROBES_PER_TEXT]
    return [" ".join(CONTEXTS["inside a word"].format(chr(c)) for c in codes[k:k + PROBES_PER_TEXT])
            for k in range(0, len(codes), PROBES_PER_TEXT)]


def main(data_dir: Path, baseline: str) -> dict:
    tokenizer_json = Path(resolve_model_source(PACKAGED_TEACHER)) / "tokenizer.json"
    data = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    lines = (data_dir / "sst2" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:SENTENCES + 1]
    sentences = [{"text": text_in_string(line.split("\t")[0])} for line in lines]
    squad = json.loads((data_dir / "squad" / "dev-v1.1.json").read_text(encoding="utf-8"))["data"]
    pairs = [{"question": text_in_string(qa["question"]), "context": text_in_string(paragraph["context"])}
             for article in squad for paragraph in article["paragraphs"] for qa in paragraph["qas"]][:PAIRS]
    probes = probe_texts()
    feeds = {"sentence": sentences, "pair": pairs, "probe_text": [{"text": text_in_string(t)} for t in probes],
             "probe_pair": [{"question": text_in_string(t), "context": text_in_string(t)} for t in probes]}
    figures, sessions = {}, {}
    for name, module in (("before", module_at(baseline)), ("after", text_tokenizer)):
        graphs = {"sentence": module.tokenizer_graph(tokenizer_json, ("text",), WINDOW, 17, 8),
                  "pair": module.tokenizer_graph(tokenizer_json, ("question", "context"), WINDOW, 17, 8, offsets=True),
                  "probe_text": module.probe_graph(data, ("text",), False),
                  "probe_pair": module.probe_graph(data, ("question", "context"), True)}
        figures[name] = {"single_graph_bytes": graphs["sentence"].ByteSize(),
                         "pair_graph_bytes": graphs["pair"].ByteSize()}
        sessions[name] = {what: text_session(graph.SerializeToString(), threads=1) for what, graph in graphs.items()}
    fastest = {(name, what): math.inf for name in sessions for what in feeds}
    for _ in range(PASSES):
        for what, inputs in feeds.items():
            for name, by_what in sessions.items():
                started = time.perf_counter()
                for one in inputs:
                    by_what[what].run(None, one)
                seconds = (time.perf_counter() - started) * 1000 / len(inputs)
                fastest[(name, what)] = min(fastest[(name, what)], seconds)
    for name in sessions:
        figures[name].update({f"ms_per_{what}": round(fastest[(name, what)], 3) for what in feeds})
    return {"date": date.today().isoformat(), "baseline": baseline,
            "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip(),
            "sentences": len(sentences), "pairs": len(pairs), "probe_texts": len(probes), "window": WINDOW,
            "threads": 1, "passes": PASSES, **figures,
            "ratios_after_over_before": {key: round(figures["after"][key] / figures["before"][key], 3)
                                         for key in figures["after"]}}


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or not (Path(sys.argv[1]) / "sst2" / "dev.tsv").is_file():
        sys.exit("error: give the data folder (with sst2/dev.tsv) and optionally a commit; usage: python "
                 "scripts/text_in_tokenizer_speed.py DATA_DIR [COMMIT] > results/text_in/tokenizer_speed_DATE.json")
    print(json.dumps(main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "HEAD~1"), indent=1))
