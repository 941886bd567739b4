"""What an app takes from an export: the files beside the model, the app folders (`export ios`, `export android`)
with their READMEs, per-task tables, Swift/Kotlin/JS templates and the QA answer routines."""
