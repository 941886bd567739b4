"""pocketbert: distil a BERT-family model and ship it inside a phone app."""

__version__ = "0.1.0"
