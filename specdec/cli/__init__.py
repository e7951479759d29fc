"""The command line: `python -m specdec generate | bench | train-draft | eval-draft`."""
