"""`pocketbert inspect` and `pocketbert compare`: what the student learned, and which student to ship."""
