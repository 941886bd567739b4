"""train: teacher fine-tuning, distillation recipes, pruning and the training benchmark.

Builds on pocketbert.core; imports neither export nor bench.
"""
