"""deepmt's Python tooling: the PyTorch reference model and model-directory I/O."""
