"""Readers of the Apple programs pocketbert writes (Core ML .mlpackage, Core AI .aimodel), on Linux: the placement
check (placement.py) predicts where each operation of a saved program will run."""
