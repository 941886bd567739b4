"""Fitting a vocabulary (`pocketbert train vocabulary`): the student's word-embedding table cut to the word pieces the
recipe's own training and transfer text uses, written as <run>/student_fitted/ for the export to ship.
core/students/piece_counts.py counts the pieces, counted_text.py chooses the text counted (never the evaluation
text) and measures what the fit lacks of the evaluation text, choice.py picks the rows, rows.py gathers them into a
copy of the student, tokenizer.py rebuilds the tokenizer for it, recovery.py prepares the short distillation the
training loop then runs, cost.py measures the fitted student against the full one, and step.py is the training stage
that runs them in that order; before_export.py runs it for `pocketbert export --vocabulary fitted` where the run
lacks it."""
