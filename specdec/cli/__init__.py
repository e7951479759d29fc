"""The command line: `python -m specdec generate | bench | train-draft | train-head | eval-draft`."""
