"""The bench's step: measure, estimate and write the bench folder."""
