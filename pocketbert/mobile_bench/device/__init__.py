"""The device kit for a Mac/iPhone and the import of what it measured."""
