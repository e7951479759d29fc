"""Warm a freshly started app: once it answers, open one session on it, so the server imports its
libraries and starts loading the models now, not when the first student arrives. start.sh runs it
beside the server, with the same arguments as streamlit (it reads the port, address and base path).

    .venv/bin/python scripts/warm_server.py [--server.port 8600] [--server.address 127.0.0.1]

The session runs the app's frame (app.py) once, which starts the background load of the default
pair, and then closes; the load goes on in the server. Prints one line; exits 0 even if the server
never answered (a server that failed says so itself).
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.asyncio.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parent))
from local_app import healthy  # noqa: E402 - this folder's helper

WAIT_FOR_SERVER_S = 120
WAIT_FOR_RUN_S = 300


def server_url(argv: list[str]) -> str:
    """The app's address from streamlit's own options (`--server.port 8600` or `--server.port=8600`)."""
    options, words = {}, list(argv)
    while words:
        word = words.pop(0)
        if word.startswith("--") and "=" in word:
            name, value = word[2:].split("=", 1)
        elif word.startswith("--") and words:
            name, value = word[2:], words.pop(0)
        else:
            continue
        options[name] = value
    host = options.get("server.address") or "127.0.0.1"
    host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    base = options.get("server.baseUrlPath", "").strip("/")
    return f"http://{host}:{options.get('server.port', '8501')}" + (f"/{base}" if base else "")


async def run_once(url: str) -> None:
    """One session: the frame's script runs to its end (it starts the models' load), then it closes."""
    async with connect(url.replace("http", "ws", 1) + "/_stcore/stream", subprotocols=["streamlit"],
                       max_size=None, open_timeout=30) as socket:
        rerun = BackMsg()
        rerun.rerun_script.query_string = ""
        rerun.rerun_script.page_script_hash = ""
        await socket.send(rerun.SerializeToString())
        async with asyncio.timeout(WAIT_FOR_RUN_S):
            async for raw in socket:
                message = ForwardMsg()
                message.ParseFromString(raw)
                if message.WhichOneof("type") == "script_finished":
                    return


def main() -> None:
    url = server_url(sys.argv[1:])
    started = time.monotonic()
    while not healthy(url):
        if time.monotonic() - started > WAIT_FOR_SERVER_S:
            print(f"warm_server: {url} did not answer; the first visitor will load the models",
                  file=sys.stderr)
            return
        time.sleep(0.3)
    try:
        asyncio.run(run_once(url))
    except Exception as error:  # noqa: BLE001 - warming is a courtesy, never fatal
        print(f"warm_server: could not open a session ({type(error).__name__}); the first visitor will "
              "load the models", file=sys.stderr)
        return
    print(f"warm_server: the app is loading its models ({time.monotonic() - started:.1f} s after start)",
          file=sys.stderr)


if __name__ == "__main__":
    main()
