"""The one lock around the models. The loaded pair is shared by every session of the app's process;
each use of the models (one round, one pass) happens under this lock, and nothing else does."""

import threading

MODEL_LOCK = threading.Lock()
