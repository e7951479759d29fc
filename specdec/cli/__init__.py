"""The command line: `python -m specdec generate | bench | rules | train-draft | train-head | ...`.

    main.py          the entry point: parse, run, and bad input as one line with exit status 2
    arguments.py     flags made from the config dataclasses, so a default is written once
    commands.py      what each command does once its arguments are parsed
    bench.py         side-by-side speed of every drafter against the target alone
    bench_report.py  bench's tables, and the rule that picks the default drafter
    classroom.py     `class open | close | export`: a class's links and QR code, its end, its answers
"""
