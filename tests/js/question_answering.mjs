// transformers.js's question-answering pipeline on a model folder in the export's hub layout, as an app calls it.
// Usage: node question_answering.mjs <model folder>  < [{"question", "context"}, ...]  > [answer text, ...]
import { pipeline, env } from "@huggingface/transformers";
import { readFileSync } from "node:fs";
import path from "node:path";

const [folder] = process.argv.slice(2);
env.allowRemoteModels = false;  // the folder, never the hub
env.localModelPath = path.dirname(path.resolve(folder)) + path.sep;
const answer = await pipeline("question-answering", path.basename(folder), { dtype: "fp32" });
const answers = [];
for (const { question, context } of JSON.parse(readFileSync(0, "utf8"))) {
  answers.push((await answer(question, context)).answer);
}
console.log(JSON.stringify(answers));
