"""Driving the app in Streamlit's AppTest, pointed at the tiny pair: open a page with settings preset,
and read its errors and metrics. Not a test module: the tests in tests/app/ import it by name
(tests/support is on pytest.ini's pythonpath)."""

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")
ROUNDS = "app_pages/rounds.py"
PROMPT = "def add(a, b):\n    return a + b\n"
XSS = "<script>alert(1)</script> and <img src=x onerror=alert(1)>"


def make_app(tiny_pair_dirs, page=None, **state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    preset = {"target": tiny_pair_dirs["target"], "drafter": tiny_pair_dirs["draft"], "chat": False,
              "prompt": PROMPT, **state}
    for key, value in preset.items():
        at.session_state[key] = value
    at.run()  # the frame first (AppTest reruns only the page script after the first run)
    if page:
        at.switch_page(page).run()
    return at


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
