// The export folder through transformers.js, as a web or Node app loads it: no file moved or renamed.
// Usage: node classify.mjs <model folder> <dtype: fp32|q8|fp16>  < texts.json  > labels.json
import { pipeline, env } from "@huggingface/transformers";
import { readFileSync } from "node:fs";
import path from "node:path";

const [folder, dtype] = process.argv.slice(2);
env.allowRemoteModels = false;  // the folder, never the hub
env.localModelPath = path.dirname(path.resolve(folder)) + path.sep;
const classify = await pipeline("text-classification", path.basename(folder), { dtype });
const labels = [];
for (const text of JSON.parse(readFileSync(0, "utf8"))) {
  const [top] = await classify(text);
  labels.push(top.label);
}
console.log(JSON.stringify(labels));
