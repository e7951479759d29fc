"""scripts/serve_class.py without starting anything: how replicas share the cores, HAProxy's
configuration (checked by HAProxy itself where it is installed), the launcher's messages, and the
multi-machine configuration that docs/howto/serve-a-class.md quotes. The launcher's behaviour with
real servers and browsers is in test_browser_class.py."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "serve_class.py"
DOC = ROOT / "docs" / "howto" / "serve-a-class.md"


def load():
    spec = importlib.util.spec_from_file_location("serve_class", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["serve_class"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


serve_class = load()


def test_replicas_get_contiguous_shares_of_the_cores():
    plan = serve_class.plan_replicas(3, 8601, list(range(8)), threads=2)
    assert [r.cores for r in plan] == [(0, 1, 2), (3, 4, 5), (6, 7)]
    assert [(r.name, r.port, r.threads) for r in plan] == [("r1", 8601, 2), ("r2", 8602, 2), ("r3", 8603, 2)]
    assert [r.cores for r in serve_class.plan_replicas(2, 8601, [4, 5], 1)] == [(4,), (5,)]


def test_more_replicas_than_cores_pins_nobody():
    assert [r.cores for r in serve_class.plan_replicas(4, 8601, [0, 1], 1)] == [None] * 4


def test_the_configuration_is_sticky_by_cookie_and_checks_health():
    replicas = serve_class.plan_replicas(2, 9001, [0, 1], 1)
    config = serve_class.haproxy_config("0.0.0.0", 9000, replicas)
    assert "bind 0.0.0.0:9000" in config
    assert "cookie SPECDEC_REPLICA insert indirect nocache httponly" in config
    assert "option httpchk GET /_stcore/health" in config
    assert "retry-on all-retryable-errors" in config  # a reset kept-alive connection is retried elsewhere
    assert "server r1 127.0.0.1:9001 cookie r1" in config and "server r2 127.0.0.1:9002 cookie r2" in config
    assert "ip_hash" not in config and "balance source" not in config  # one NAT = one address


@pytest.mark.skipif(serve_class.haproxy_binary() is None, reason="HAProxy is not installed")
def test_haproxy_accepts_the_configuration(tmp_path):
    path = tmp_path / "haproxy.cfg"
    path.write_text(serve_class.haproxy_config("127.0.0.1", 9000, serve_class.plan_replicas(3, 9001, [0], 1)))
    command = [serve_class.haproxy_binary(), "-c", "-f", str(path)]
    check = subprocess.run(command, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    path.write_text("backend broken\n    balance nowhere\n")  # the check can fail
    assert subprocess.run(command, capture_output=True).returncode != 0


@pytest.mark.parametrize(("argv", "message"), [
    (["--replicas", "0"], "--replicas must be at least 1"),
    (["--threads", "0"], "--threads must be at least 1"),
    (["--backend", "10.0.0.11"], "expected HOST:PORT"),
    (["--port", "70000"], "is not a free range of ports"),
])
def test_bad_arguments_get_a_message(argv, message, capsys):
    with pytest.raises(SystemExit) as stopped:
        serve_class.parse_args(argv)
    assert stopped.value.code == 2 and message in capsys.readouterr().err


def test_arguments_after_a_double_dash_go_to_streamlit():
    args = serve_class.parse_args(["--replicas", "3", "--", "--server.maxUploadSize", "10"])
    assert args.replicas == 3 and args.streamlit_args == ["--server.maxUploadSize", "10"]


def test_the_docs_quote_the_multi_machine_configuration_the_script_prints(capsys):
    text = DOC.read_text(encoding="utf-8")
    command = re.search(r"scripts/serve_class\.sh (--backend .*--print-config)", text)
    assert command, "the page quotes the --backend ... --print-config command"
    assert serve_class.main(command.group(1).split()) == 0
    printed = capsys.readouterr().out
    quoted = re.search(r"```haproxy\n(.*?)```", text, re.S).group(1)
    assert quoted == printed, "the page's HAProxy configuration is not what the script prints"
