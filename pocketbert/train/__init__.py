"""train: teacher fine-tuning and distillation into a smaller student."""
