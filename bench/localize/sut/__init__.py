"""The systems of Culprit's public fault suite, one module each (see ../systems.py)."""
