"""The tasks: the Task protocol and the registered tasks, sentiment and qa (registry), file formats and named datasets
(data), a task's train and eval examples (task_data), extractive QA's windows, spans and scores (qa), and the
distillation losses (losses). It may import the wings below it (process/) and core's ground."""
