"""export: ONNX (fp32, fp16, int8, text-in, one-call QA), ORT Mobile, Core ML, Core AI and ExecuTorch programs, each
proven on its own runtime (or on Linux, for Apple's, by the evaluators) to give the student's answers.

Builds on pocketbert.core; imports neither train nor bench. cli.py (the commands) stands over six wings, each
importing only those below it: steps/ (plan, build/place/gate runners, record), app/ (the app folders), programs/
(the program makers and the catalogue of variants), text_in/ (the tokenizer inside the graph), checks/ (gates,
probes, the app runtimes) and evaluators/ (Apple's programs run on Linux).
"""
