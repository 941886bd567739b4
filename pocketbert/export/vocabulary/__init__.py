"""A fitted vocabulary (export.vocabulary: fitted): the student's word-embedding table cut to the word pieces the
recipe's own text uses. counting.py counts them, choice.py picks the rows, rows.py gathers them into a copy of the
student, tokenizer.py rebuilds the tokenizer for it, cost.py measures the fitted student against the full one, and
step.py runs them in that order for the export."""
