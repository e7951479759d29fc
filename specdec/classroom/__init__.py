"""A class answering together: the instructor asks the room, every student answers from their own
browser, and the projector shows the room's answers beside the measured truth (Peer Instruction).
No Streamlit and no torch here: the app (app_pages/class_poll.py) and the CLI (`class open`) call it.

    questions.py  a question's shape (options, or sliders over a range), answers checked and added up
    invites.py    class codes read aloud, the instructor's key, the links and their QR code
    store.py      the database every replica shares (SQLite in WAL mode, or SPECDEC_CLASS_DB)
"""
