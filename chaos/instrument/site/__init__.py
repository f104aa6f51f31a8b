"""The directory a framework-started member gets on ``PYTHONPATH`` (see ``sitecustomize.py``).

A package only so that a non-editable install ships ``sitecustomize.py`` (the project's package
discovery takes packages); on ``PYTHONPATH`` the directory itself is the entry, and this file is
never imported from there.
"""
