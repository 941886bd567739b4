// Runs a generated QA post-processing routine (export/app/qa_postprocess.py) on a golden file the export wrote.
// Usage: node qa_answer_check.mjs <qa_answer.mjs> <qa_golden.json>
// Prints one line per question: <window starts, comma-separated> <window> <start> <end> (-1 -1 -1: no answer).
import { readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [routine, goldenPath] = process.argv.slice(2);
const { windowStarts, qaAnswer } = await import(pathToFileURL(path.resolve(routine)).href);
const golden = JSON.parse(readFileSync(goldenPath, "utf8"));
for (const q of golden.questions) {
  const starts = windowStarts(q.context_tokens, q.question_tokens, golden.max_length, golden.stride);
  const span = qaAnswer(q.windows.map((w) => w.start_logits), q.windows.map((w) => w.end_logits),
                        q.windows.map((w) => w.context_index), golden.n_best, golden.max_answer_length);
  console.log(`${starts.join(",")} ${span ? `${span.window} ${span.start} ${span.end}` : "-1 -1 -1"}`);
}
