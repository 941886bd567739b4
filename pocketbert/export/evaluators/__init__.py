"""How pocketbert reads and runs Apple programs (Core ML's ML Programs, Core AI's programs) on Linux with numpy: one
plan runtime and one numeric layer under the MIL and Core AI front ends, and the placement check (placement.py)
that reads the same programs to predict where each operation will run."""
