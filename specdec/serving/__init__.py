"""One server, many students: what keeps a shared server safe to use at once.

    lock.py            the one lock around the models every session shares
    allowed_models.py  which models a shared link may load, and loads that already failed
"""
